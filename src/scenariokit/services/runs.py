"""Use cases of runs: queueing, reading, cancelling, and the worker side (claim, progress, finish)."""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
import uuid
from collections.abc import Container, Sequence
from datetime import timedelta
from pathlib import Path

import attrs

from scenariokit.domain.browser import BrowserSettings, masked_settings, run_settings
from scenariokit.domain.code import snippets_called
from scenariokit.domain.errors import Conflict, NotFound, ScenarioKitError, ValidationError
from scenariokit.domain.job import (
    CredentialValue,
    RunFinished,
    RunJob,
    SessionSaved,
    browser_job_fields,
    step_job,
)
from scenariokit.domain.model import (
    STREAK_WINDOW,
    Environment,
    FieldError,
    LastPass,
    Run,
    RunAttempt,
    RunError,
    RunErrorKind,
    RunLogEntry,
    RunStats,
    RunStatus,
    RunTimings,
    Scenario,
    Session,
    SessionStatus,
    StepResult,
    is_flaky,
    queued_run,
    skip_remaining,
    streak_of,
    utcnow,
)
from scenariokit.formats.inputs import RunBatchInput, RunInput
from scenariokit.formats.presenters import RunDetail
from scenariokit.formats.queries import LogQuery, Page, RunQuery, StatsQuery
from scenariokit.storage.ports import RunLease, UnitOfWork

from . import audit
from .base import ServiceBase, missing_reference, require

log = logging.getLogger(__name__)
_ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@attrs.frozen
class RunBatch:
    """The runs one request queued together, one per environment, under one id."""

    batch_id: uuid.UUID
    #: in the order of the request's ``environmentIds``, each with its environment
    runs: tuple[RunDetail, ...]


async def recorded_browser(
    uow: UnitOfWork, scenario: Scenario, environment: Environment, *, strict: bool = True
) -> BrowserSettings:
    """The browser settings a run of ``scenario`` against ``environment`` records when it is queued.

    ``strict``: an ``httpCredentials`` alias the scenario has not linked is a ValidationError naming
    the field (a request); else it is recorded as it is and the run fails at its start saying why (a
    schedule's fire, which nobody answers). A header value holding a linked secret is masked.
    """
    try:
        aliases = {link.alias for link in scenario.credentials}
        settings = run_settings(environment.browser, scenario.browser, aliases)
    except FieldError as exc:
        if strict:
            why = f"environment {environment.name!r}: {exc.message}"
            raise ValidationError(f"invalid run: {why}", {exc.field: why}) from None
        settings = environment.browser.overlaid_by(scenario.browser)
    if settings.extra_http_headers and scenario.credentials:
        linked = await uow.credentials.get_many([link.credential_id for link in scenario.credentials])
        settings = masked_settings(settings, [c.secret for c in linked if c.secret])
    return settings


class RunService(ServiceBase):
    """Runs: queue one, list them, read one with its log, cancel one, fetch its files."""

    # --- callers' side -------------------------------------------------------------------------

    async def create(self, command: RunInput) -> Run:
        """Queue a run of a scenario against an environment; it starts ``in_progress``."""
        async with self.ctx.uow() as uow:
            scenario = await self._runnable(uow, command.scenario_id, command.session_id)
            environment = await uow.environments.get(command.environment_id)
            if environment is None:
                raise missing_reference("environmentId", "environment", command.environment_id)
            run = queued_run(
                scenario,
                command.environment_id,
                save_session=command.save_session,
                source_session_id=command.session_id,
                browser=await recorded_browser(uow, scenario, environment),
            )
            await uow.runs.add(run)
            await audit.record(
                uow, "run", "run", run.id, f"queued a run of scenario {scenario.name!r} ({scenario.id})"
            )
            await uow.commit()
        self.ctx.control.run_queued()
        return run

    async def create_batch(self, command: RunBatchInput) -> RunBatch:
        """Queue one run of a scenario per environment, together: all of them or, on a bad id, none."""
        batch_id = uuid.uuid4()
        async with self.ctx.uow() as uow:
            scenario = await self._runnable(uow, command.scenario_id, command.session_id)
            found = {env.id: env for env in await uow.environments.get_many(command.environment_ids)}
            missing = {
                f"environmentIds[{i}]": f"no environment with id {ident}"
                for i, ident in enumerate(command.environment_ids)
                if ident not in found
            }
            if missing:
                raise ValidationError("environmentIds refers to missing environments", missing)
            runs = tuple(
                [
                    queued_run(
                        scenario,
                        environment_id,
                        save_session=command.save_session,
                        source_session_id=command.session_id,
                        batch_id=batch_id,
                        browser=await recorded_browser(uow, scenario, found[environment_id]),
                    )
                    for environment_id in command.environment_ids
                ]
            )
            for run in runs:
                await uow.runs.add(run)
                await audit.record(
                    uow,
                    "run",
                    "run",
                    run.id,
                    f"queued a run of scenario {scenario.name!r} in batch {batch_id}",
                )
            await uow.commit()
        self.ctx.control.run_queued()
        async with self.ctx.uow(readonly=True) as uow:
            page = await _with_links(uow, Page(items=runs, total=len(runs), page=1, limit=len(runs)))
        return RunBatch(batch_id=batch_id, runs=page.items)

    async def _runnable(
        self, uow: UnitOfWork, scenario_id: uuid.UUID, session_id: uuid.UUID | None
    ) -> Scenario:
        """The scenario a run request names, once it and the saved session it starts from exist."""
        scenario = await uow.scenarios.get(scenario_id)
        if scenario is None:
            raise missing_reference("scenarioId", "scenario", scenario_id)
        if session_id is not None:
            session = await uow.sessions.get(session_id)
            if session is None or session.storage_state is None:
                raise missing_reference("sessionId", "saved session", session_id)
        return scenario

    async def list(self, query: RunQuery | None = None, *, timings: bool = True) -> Page[RunDetail]:
        """One page of runs (newest first unless the query says otherwise), environment and session eager.

        Without ``timings`` each run's ``timings`` is None, not read: what a list answered over REST or
        MCP leaves out anyway (docs/rest.md, "Run timings"), a third of what a page of runs read.
        """
        async with self.ctx.uow(readonly=True) as uow:
            return await _with_links(uow, await uow.runs.list(query or RunQuery(), timings=timings))

    async def list_for_scenario(
        self, scenario_id: uuid.UUID, query: RunQuery | None = None, *, timings: bool = True
    ) -> Page[RunDetail]:
        """One page of the runs of one scenario, environment and session eager (``timings`` as in
        :meth:`list`)."""
        query = attrs.evolve(query or RunQuery(), scenario_id=scenario_id)
        async with self.ctx.uow(readonly=True) as uow:
            require(await uow.scenarios.get(scenario_id), "scenario", scenario_id)
            return await _with_links(uow, await uow.runs.list(query, timings=timings))

    async def stats(self, scenario_id: uuid.UUID, query: StatsQuery | None = None) -> RunStats:
        """How a scenario's finished runs of the last ``query.days`` days went (docs/monitoring.md)."""
        since = utcnow() - timedelta(days=(query or StatsQuery()).days)
        async with self.ctx.uow(readonly=True) as uow:
            scenario = require(await uow.scenarios.get(scenario_id), "scenario", scenario_id)
            stats = await uow.runs.stats(scenario_id, since)
            last_pass = (await uow.runs.last_passes([scenario_id])).get(scenario_id)
        # a pass from before revisions were kept executed an unknown revision: not counted as changed
        changed = last_pass is not None and last_pass.revision not in (None, scenario.revision)
        return attrs.evolve(stats, last_pass=last_pass, changed_since_last_pass=changed)

    async def last_pass_before(self, run: Run) -> LastPass | None:
        """The latest run of ``run``'s scenario that passed before ``run`` was queued, if any."""
        async with self.ctx.uow(readonly=True) as uow:
            found = await uow.runs.last_passes([run.scenario_id], before=run.created_at)
        return found.get(run.scenario_id)

    async def last_passes(self, scenario_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, LastPass]:
        """The latest passing run of each of these scenarios (those that have one)."""
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.runs.last_passes(scenario_ids)

    async def get(self, run_id: uuid.UUID, logs: LogQuery | None = None) -> RunDetail:
        """A run with its environment, its saved session and a page of its log (filtered by ``q``)."""
        async with self.ctx.uow(readonly=True) as uow:
            run = require(await uow.runs.get(run_id), "run", run_id)
            environment = await uow.environments.get(run.environment_id)
            session = await uow.sessions.get(run.session_id) if run.session_id else None
            page = await uow.runs.list_logs(run_id, logs or LogQuery())
        return RunDetail(run=run, environment=environment, session=session, logs=page)

    async def wait_batch(self, batch: RunBatch, timeout: float, *, poll_seconds: float = 0.2) -> RunBatch:
        """The batch once every run of it has finished, or as it is when ``timeout`` seconds have passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        ids = [detail.run.id for detail in batch.runs]
        while True:
            async with self.ctx.uow(readonly=True) as uow:
                found = {run.id: run for run in await uow.runs.get_many(ids)}
                runs = tuple(found[ident] for ident in ids if ident in found)
                page = await _with_links(
                    uow, Page(items=runs, total=len(runs), page=1, limit=max(len(runs), 1))
                )
            left = deadline - loop.time()
            if all(detail.run.finished for detail in page.items) or left <= 0:
                return RunBatch(batch_id=batch.batch_id, runs=page.items)
            await asyncio.sleep(min(poll_seconds, left))

    async def wait(
        self, run_id: uuid.UUID, timeout: float, *, logs: LogQuery | None = None, poll_seconds: float = 0.2
    ) -> RunDetail:
        """The run once it has finished, or as it is when ``timeout`` seconds have passed.

        It reads the store, so it sees runs executed by any process (the server, ``scenariokit worker``).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            detail = await self.get(run_id, logs)
            left = deadline - loop.time()
            if detail.run.finished or left <= 0:
                return detail
            await asyncio.sleep(min(poll_seconds, left))

    async def cancel(self, run_id: uuid.UUID) -> Run:
        """Stop a run in progress; it ends ``fail`` with ``error.kind`` ``cancelled``.

        A run that nobody executes (still queued, its lease run out, or held by this process's
        scheduler that no longer executes it) is finished here at once; a run a live worker executes
        is stopped by that worker, which sees the request within a second.
        """
        async with self.ctx.uow() as uow:
            run = require(await uow.runs.get(run_id), "run", run_id)
            if run.finished:
                raise Conflict(f"run {run_id} has already finished ({run.status.value})")
            await uow.runs.request_cancel(run_id)
            await audit.record(
                uow, "cancel", "run", run_id, f"cancelled a run of scenario {run.scenario_name!r}"
            )
            await uow.commit()
        executing_here = await self.ctx.control.cancel(run_id)
        async with self.ctx.uow() as uow:
            lease = await uow.runs.lease(run_id, lock=True)
            run = require(await uow.runs.get(run_id), "run", run_id)
            reason = None if executing_here or run.finished else self._orphaned(lease)
            if reason is None:
                return run
            finished, scenario = await self._write_failure(uow, run, RunErrorKind.CANCELLED, reason)
            await uow.commit()
        await self._notify_finished(finished, scenario)
        return finished

    def _orphaned(self, lease: RunLease | None) -> str | None:
        """Why nobody executes an unfinished run with this lease, or None when a live worker does."""
        if lease is None:
            return "cancelled before it started"
        if lease.expires_at < utcnow():
            return f"cancelled; nothing was executing it (the lease of {lease.owner} had run out)"
        if lease.owner == self.ctx.control.owner:
            return f"cancelled; nothing was executing it (its scheduler {lease.owner} no longer did)"
        return None

    async def artifact(self, run_id: uuid.UUID, name: str) -> Path:
        """The file of an artifact the run recorded (a screenshot or trace)."""
        if not _ARTIFACT_NAME.match(name):
            raise ValidationError("invalid artifact name", {"name": "must be a plain file name"})
        async with self.ctx.uow(readonly=True) as uow:
            run = require(await uow.runs.get(run_id), "run", run_id)
        if name not in run.artifacts:
            raise NotFound("artifact", name)
        path = self.artifacts_dir(run_id) / name
        if not path.is_file():
            raise NotFound("artifact", name)
        return path

    def artifacts_dir(self, run_id: uuid.UUID) -> Path:
        """Where a run's files are kept."""
        return self.ctx.settings.artifacts_dir / str(run_id)

    # --- workers' side -------------------------------------------------------------------------

    async def claim(self, owner: str) -> tuple[Run, RunJob] | None:
        """Take the oldest queued run for ``owner`` with a lease (its log says ``claimed by <owner>``),
        and resolve what executing it needs.

        A run that cannot be started (its scenario or environment was deleted, a linked credential
        cannot be decrypted) is finished at once as ``fail`` saying why, and the next run is taken:
        none stays leased by a claim that went nowhere.
        """
        while True:
            now = utcnow()
            expires = now + timedelta(seconds=self.ctx.settings.lease_seconds)
            async with self.ctx.uow() as uow:
                run = await uow.runs.claim_next(owner, now, expires)
                if run is None:
                    return None
                # the run's first log line, with the claim: no write of its own
                claimed = RunLogEntry(run_id=run.id, level="debug", message=f"claimed by {owner}")
                await uow.runs.append_logs([claimed])
                await uow.commit()
            try:
                job, scenario = await self._job_of(run)
            except Exception as exc:
                if isinstance(exc, ScenarioKitError):
                    reason = str(exc)
                    log.warning("run %s cannot start: %s", run.id, reason)
                else:
                    reason = f"{type(exc).__name__}: {exc}"
                    log.exception("resolving run %s failed", run.id)
                await self.fail(run.id, RunErrorKind.ERROR, f"the run could not be started: {reason}")
                continue
            self.ctx.hooks.run_started(run=run, scenario=scenario)
            return run, job

    async def _job_of(self, run: Run) -> tuple[RunJob, Scenario]:
        """What a worker needs to execute ``run``; raises when something it needs is gone or unreadable.

        The steps, links, limits and retries are those of the revision the run was queued with, not
        the scenario's current ones: an edit while the run waits in the queue does not change it.
        """
        async with self.ctx.uow(readonly=True) as uow:
            scenario = await uow.scenarios.get(run.scenario_id)
            environment = await uow.environments.get(run.environment_id)
            if scenario is None or environment is None:
                raise ScenarioKitError(
                    f"the run's {'scenario' if scenario is None else 'environment'} was deleted"
                )
            scenario = await _as_queued(uow, scenario, run)
            credentials = {
                c.id: c
                for c in await uow.credentials.get_many([x.credential_id for x in scenario.credentials])
            }
            snippets = await _snippets_of(uow, [step.exec_code for step in scenario.steps])
            state = None
            if run.source_session_id is not None:
                source = await uow.sessions.get(run.source_session_id)
                state = source.storage_state if source else None
        try:
            browser = run_settings(
                environment.browser, scenario.browser, {link.alias for link in scenario.credentials}
            )
        except FieldError as exc:
            raise ScenarioKitError(f"{exc.field}: {exc.message}") from None
        job = RunJob(
            run_id=run.id,
            scenario_id=scenario.id,
            scenario_name=scenario.name,
            steps=tuple(step_job(step) for step in scenario.steps),
            env_name=environment.name,
            env_data=dict(environment.data),
            credentials=tuple(
                CredentialValue(alias=link.alias, username=cred.username, secret=cred.secret)
                for link in scenario.credentials
                if (cred := credentials.get(link.credential_id)) is not None
            ),
            snippets=snippets,
            timeout_seconds=scenario.timeout_seconds,
            save_session=run.save_session,
            storage_state=state,
            artifacts_dir=self.artifacts_dir(run.id),
            trace=self.ctx.settings.trace,
            retries=scenario.retries,
            **browser_job_fields(browser),
        )
        return job, scenario

    async def renew_lease(self, run_id: uuid.UUID, owner: str) -> bool:
        """Extend ``owner``'s lease on a run it executes; False when the lease was lost."""
        expires = utcnow() + timedelta(seconds=self.ctx.settings.lease_seconds)
        async with self.ctx.uow() as uow:
            renewed = await uow.runs.renew_lease(run_id, owner, expires)
            await uow.commit()
        return renewed

    async def hand_back(self, run_id: uuid.UUID, owner: str, reason: str) -> bool:
        """Put a run ``owner`` executes back in the queue, to start over on whichever scheduler claims it.

        What its cut-short attempt recorded (step results, earlier attempts, the start time) is cleared,
        its log keeps what it wrote and ``reason``. False, changing nothing, when ``owner`` no longer
        holds the run (it finished, or its lease ran out and another took it).
        """
        async with self.ctx.uow() as uow:
            lease = await uow.runs.lease(run_id, lock=True)
            run = await uow.runs.get(run_id)
            if lease is None or lease.owner != owner or run is None or run.finished:
                return False
            await uow.runs.update(
                attrs.evolve(run, step_results=(), attempts=(), flaky=False, started_at=None)
            )
            await uow.runs.release_lease(run_id, owner)
            await uow.runs.append_logs([RunLogEntry(run_id=run_id, level="warning", message=reason)])
            await uow.commit()
        return True

    async def cancel_requested(self, run_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Which of these runs someone asked to cancel."""
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.runs.cancel_requested(run_ids)

    async def append_logs(self, entries: Sequence[RunLogEntry]) -> None:
        """Write run log lines as they happen."""
        if not entries:
            return
        async with self.ctx.uow() as uow:
            await uow.runs.append_logs(entries)
            await uow.commit()

    async def record_progress(
        self,
        run_id: uuid.UUID,
        entries: Sequence[RunLogEntry],
        step_results: Sequence[StepResult] | None = None,
    ) -> None:
        """Write a running run's new log lines and, when given, its step results so far: one transaction.

        What the scheduler writes while a run executes, so readers see its progress; the step results
        replace the stored ones (the current attempt's, in order) without reading the run first, and
        only while it is in progress. Nothing to write: no transaction at all.
        """
        if not entries and step_results is None:
            return
        async with self.ctx.uow() as uow:
            if entries:
                await uow.runs.append_logs(entries)
            if step_results is not None:
                await uow.runs.set_step_results(run_id, step_results)
            await uow.commit()

    async def record_attempt(self, run_id: uuid.UUID, attempt: RunAttempt) -> None:
        """Show a failed attempt that will be tried again; the next attempt's step results start afresh.

        For readers while the run goes on: the scheduler passes every attempt to :meth:`finish` itself.
        """
        async with self.ctx.uow() as uow:
            run = await uow.runs.get(run_id)
            if run is None or run.finished:
                return
            await uow.runs.update(attrs.evolve(run, attempts=(*run.attempts, attempt), step_results=()))
            await uow.commit()

    async def finish(
        self,
        run_id: uuid.UUID,
        outcome: RunFinished,
        *,
        artifacts: Sequence[str] = (),
        session: SessionSaved | None = None,
        timings: RunTimings | None = None,
        earlier: Sequence[RunAttempt] = (),
        logs: Sequence[RunLogEntry] = (),
    ) -> Run | None:
        """Store a run's outcome, its timings, the session it saved and its last log lines, in one
        transaction.

        ``earlier`` holds the failed attempts before the one that gave ``outcome`` (a scenario's
        retries): the run then keeps every attempt, this last one too, and says whether it was flaky.
        ``logs`` are written with the outcome (also when the run had finished meanwhile: a line is
        never lost). The ``run_finished`` hook's streak is read in the same transaction, after the
        outcome; it and the scenario are each read only when an implementation of the hook takes them.
        """
        takes = self.ctx.hooks.run_finished_takes
        async with self.ctx.uow() as uow:
            if logs:
                await uow.runs.append_logs(logs)
            run = await uow.runs.get(run_id)
            if run is None or run.finished:
                await uow.commit()
                return run
            session_id = None
            if session is not None:
                saved = Session(
                    name=f"run-{run_id}",
                    status=SessionStatus.OPEN,
                    token=session.token,
                    storage_state=session.storage_state,
                    run_id=run_id,
                )
                await uow.sessions.add(saved)
                session_id = saved.id
            attempts: tuple[RunAttempt, ...] = ()
            if earlier:
                last = RunAttempt(
                    attempt=len(earlier) + 1,
                    status=RunStatus(outcome.status),
                    error=outcome.error,
                    step_results=outcome.step_results,
                    started_at=outcome.started_at,
                    finished_at=outcome.finished_at,
                )
                attempts = (*earlier, last)
            run = attrs.evolve(
                run,
                attempts=attempts,
                flaky=is_flaky(attempts),
                status=RunStatus(outcome.status),
                error=outcome.error,
                step_results=outcome.step_results,
                artifacts=tuple(dict.fromkeys((*run.artifacts, *artifacts))),
                started_at=run.started_at or outcome.started_at,
                finished_at=outcome.finished_at,
                session_id=session_id,
                timings=timings,
            )
            await uow.runs.update(run)
            scenario = streak = None
            if "scenario" in takes:
                scenario = await uow.scenarios.get(run.scenario_id)
            if "streak" in takes:
                streak = streak_of(await uow.runs.recent_statuses(run, STREAK_WINDOW + 1))
            await uow.commit()
        self.ctx.hooks.run_finished(run=run, scenario=scenario, streak=streak)
        return run

    async def record_browser_close(
        self, run_id: uuid.UUID, milliseconds: int, *, stored: RunTimings | None = None
    ) -> None:
        """Add the close of a finished run's browser to its timings (it closes after the outcome).

        ``stored``: the timings the caller stored with the outcome; they are written back with the
        close in one statement, without reading the run.
        """
        if stored is not None:
            async with self.ctx.uow() as uow:
                await uow.runs.set_timings(run_id, attrs.evolve(stored, browser_close_ms=milliseconds))
                await uow.commit()
            return
        async with self.ctx.uow() as uow:
            run = await uow.runs.get(run_id)
            if run is None or run.timings is None:
                return
            timings = attrs.evolve(run.timings, browser_close_ms=milliseconds)
            await uow.runs.update(attrs.evolve(run, timings=timings))
            await uow.commit()

    async def fail(self, run_id: uuid.UUID, kind: RunErrorKind, message: str) -> Run | None:
        """Finish an unfinished run as ``fail`` with ``message``, its remaining steps ``skipped``.

        The smallest write that ends a run: the scheduler falls back to it when storing a full outcome
        keeps failing, and a claim uses it for a run that cannot start. The message goes to the log too.
        """
        message = message.replace("\x00", "")  # a NUL would make PostgreSQL refuse this write as well
        async with self.ctx.uow() as uow:
            run = await uow.runs.get(run_id)
            if run is None or run.finished:
                return run
            finished, scenario = await self._write_failure(uow, run, kind, message)
            await uow.runs.append_logs([RunLogEntry(run_id=run_id, level="error", message=message)])
            await uow.commit()
        await self._notify_finished(finished, scenario)
        return finished

    async def reap_expired(
        self, *, alive_owner: str | None = None, executing: Container[uuid.UUID] = ()
    ) -> builtins.list[uuid.UUID]:
        """Finish as ``worker_lost`` every run whose lease ran out: nothing executes it any more.

        ``alive_owner`` names the caller's own scheduler and ``executing`` the runs it executes (asked
        for each run as it is reached): those keep their lease even when a renewal came late under
        load. Its other runs (a claim whose execution never began, an outcome it could not store) are
        reaped like anyone else's.
        """
        reaped: builtins.list[tuple[Run, Scenario | None]] = []
        async with self.ctx.uow() as uow:
            for expired in await uow.runs.expired_leases(utcnow()):
                if expired.owner == alive_owner and expired.run_id in executing:
                    continue
                # Re-read under a lock: the owner may have renewed since the list was taken.
                lease = await uow.runs.lease(expired.run_id, lock=True)
                if lease is None or lease.expires_at >= utcnow():
                    continue
                run = await uow.runs.get(lease.run_id)
                if run is None or run.finished:
                    continue
                if lease.owner == alive_owner:
                    message = f"nothing executes the run any more: its scheduler {lease.owner} lost it"
                else:
                    message = (
                        f"the worker {lease.owner} stopped renewing its lease (it died or lost the database)"
                    )
                reaped.append(await self._write_failure(uow, run, RunErrorKind.WORKER_LOST, message))
                await uow.runs.append_logs([RunLogEntry(run_id=run.id, level="error", message=message)])
            await uow.commit()
        for finished, scenario in reaped:
            await self._notify_finished(finished, scenario)
        return [finished.id for finished, _ in reaped]

    async def close_session(self, session_id: uuid.UUID) -> None:
        """Mark a saved session closed: its live context was released."""
        async with self.ctx.uow() as uow:
            session = await uow.sessions.get(session_id)
            if session is None or session.status is SessionStatus.CLOSED:
                return
            await uow.sessions.update(attrs.evolve(session, status=SessionStatus.CLOSED, updated_at=utcnow()))
            await uow.commit()

    async def session_of_run(self, run_id: uuid.UUID) -> Session | None:
        """The session a run saved, if any."""
        async with self.ctx.uow(readonly=True) as uow:
            run = await uow.runs.get(run_id)
            if run is None or run.session_id is None:
                return None
            return await uow.sessions.get(run.session_id)

    async def close_stale_sessions(self) -> int:
        """Mark closed the open sessions older than the keep-alive: no live context can hold them."""
        before = utcnow() - timedelta(seconds=self.ctx.settings.session_keepalive_seconds)
        async with self.ctx.uow() as uow:
            count = await uow.sessions.close_open(before)
            await uow.commit()
        return count

    # --- helpers --------------------------------------------------------------------------------

    async def _write_failure(
        self, uow: UnitOfWork, run: Run, kind: RunErrorKind, message: str
    ) -> tuple[Run, Scenario | None]:
        """Write ``run`` as failed (steps not yet done ``skipped``) in ``uow``; the caller commits."""
        now = utcnow()
        scenario = await uow.scenarios.get(run.scenario_id)
        if scenario is not None:
            try:
                scenario = await _as_queued(uow, scenario, run)
            except ScenarioKitError:
                pass  # its revision is gone: the current steps are the best guess of what it skipped
        finished = attrs.evolve(
            run,
            status=RunStatus.FAIL,
            error=RunError(kind=kind, message=message),
            step_results=skip_remaining(scenario.steps if scenario else (), run.step_results),
            started_at=run.started_at or now,
            finished_at=now,
        )
        await uow.runs.update(finished)
        return finished, scenario

    async def _notify_finished(self, run: Run, scenario: Scenario | None) -> None:
        """Fire ``run_finished`` once the outcome is committed (call it after the unit of work).

        With the run's streak among the runs of its scenario against its environment, read from the
        store, so a plugin alerting on a change of state (pass to fail, fail to pass) alerts once
        whichever process finished the run; read only when an implementation takes it.
        """
        streak = None
        if "streak" in self.ctx.hooks.run_finished_takes:
            try:
                async with self.ctx.uow(readonly=True) as uow:
                    streak = streak_of(await uow.runs.recent_statuses(run, STREAK_WINDOW + 1))
            except Exception:  # the outcome is stored; a plugin still hears of it, without history
                log.exception("reading the streak of run %s failed", run.id)
                streak = streak_of([run.status])
        self.ctx.hooks.run_finished(run=run, scenario=scenario, streak=streak)


async def _as_queued(uow: UnitOfWork, scenario: Scenario, run: Run) -> Scenario:
    """The scenario as the revision ``run`` was queued with holds it (as it is, for a run from before
    revisions were kept); raises when that revision is not stored."""
    if run.scenario_revision is None or run.scenario_revision == scenario.revision:
        return scenario
    revision = await uow.revisions.get(scenario.id, run.scenario_revision)
    if revision is None:
        raise ScenarioKitError(f"revision {run.scenario_revision} of the run's scenario is not stored")
    return revision.as_scenario(scenario)


async def _snippets_of(uow: UnitOfWork, codes: Sequence[str]) -> dict[str, str]:
    """The stored snippets steps of ``codes`` may run, alias -> code.

    The snippets the steps call by name, and those these call, and so on: a store of hundreds of
    snippets costs a run the few it calls, not a read and a frame of all of them. Every snippet when
    that cannot be told: some code may call one by an alias it computes
    (:func:`~scenariokit.domain.code.snippets_called`), or calls one the store does not hold, which may
    be a plugin's (its code, read in the worker, may call any stored one) or nobody's (the run's
    message names the nearest stored aliases).
    """
    wanted: set[str] = set()
    for code in codes:
        called = snippets_called(code)
        if called is None:
            return await uow.snippets.code_by_alias()
        wanted |= called
    found: dict[str, str] = {}
    while pending := wanted - found.keys():
        stored = await uow.snippets.code_by_alias(pending)
        if stored.keys() != pending:
            return await uow.snippets.code_by_alias()
        for alias, code in stored.items():
            called = snippets_called(code)
            if called is None:
                return await uow.snippets.code_by_alias()
            found[alias] = code
            wanted |= called
    return found


async def _with_links(uow: UnitOfWork, page: Page[Run]) -> Page[RunDetail]:
    """The page's runs with their environments and sessions: one query each for the page, not per row."""
    env_ids = list(dict.fromkeys(run.environment_id for run in page.items))
    session_ids = list(dict.fromkeys(run.session_id for run in page.items if run.session_id))
    environments = {env.id: env for env in await uow.environments.get_many(env_ids)}
    sessions = {item.id: item for item in await uow.sessions.get_many(session_ids)} if session_ids else {}
    items = tuple(
        RunDetail(
            run=run,
            environment=environments.get(run.environment_id),
            session=sessions.get(run.session_id) if run.session_id else None,
        )
        for run in page.items
    )
    return Page(items=items, total=page.total, page=page.page, limit=page.limit)
