"""The scheduler: claims queued runs from the store and executes them on a worker pool.

The claim is the same code path for the server's own scheduler and for ``scenariokit worker``
processes on other machines sharing one PostgreSQL: a lease (owner, expiry) renewed by a heartbeat.
A run whose worker stops renewing is finished as ``worker_lost`` by whichever scheduler reaps first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Container
from typing import Any

import attrs

from scenariokit.domain.errors import BrowserUnavailable
from scenariokit.domain.job import (
    ArtifactSaved,
    BrowserClosed,
    LogEvent,
    RunEvent,
    RunFinished,
    RunJob,
    SessionReleased,
    SessionSaved,
    StepFinished,
)
from scenariokit.domain.model import (
    RunAttempt,
    RunError,
    RunErrorKind,
    RunLogEntry,
    RunStatus,
    RunTimings,
    StepResult,
    skip_remaining,
    utcnow,
)
from scenariokit.logs import about_run
from scenariokit.runner.confinement.sandbox import SandboxConfig, store_paths
from scenariokit.runner.parent.authoring_host import AuthoringHost
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.parent.timeline import RunTimeline, close_ms, with_close
from scenariokit.runner.worker.browser import BrowserConfig
from scenariokit.services import Services

log = logging.getLogger(__name__)

#: How often a running run's cancel flag is read from the store (cancel must act within a second).
CANCEL_POLL_SECONDS = 0.4
#: How often a running run's new log lines and step results are written (one transaction each time).
LOG_FLUSH_SECONDS = 0.25
#: How long a finished run's stored timings wait for its browser's close before they are dropped
STORED_TIMINGS_SECONDS = 60.0
#: The pauses between attempts to store a run's outcome; after the last, the run is failed instead.
FINISH_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: How long a drain that ran out still waits for outcomes being stored before it hands runs back.
FINISH_WAIT_SECONDS = 5.0


async def _wait_for_any(
    tasks: set[asyncio.Task[Any]], seconds: float, cut_short: asyncio.Event | None
) -> None:
    """Wait until every task is done, ``seconds`` have passed or ``cut_short`` is set, whichever is first."""
    stop = asyncio.ensure_future(cut_short.wait()) if cut_short is not None else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        while (pending := {task for task in tasks if not task.done()}) and not (stop and stop.done()):
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.wait(pending | ({stop} if stop else set()), timeout=left,
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
    finally:
        if stop is not None:
            stop.cancel()


def default_owner() -> str:
    """A name for this scheduler that is unique across machines and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@attrs.define
class _Execution:
    """A run this scheduler executes, and what it has seen of it so far."""

    run_id: uuid.UUID
    job: RunJob
    timeline: RunTimeline
    artifacts: list[str] = attrs.field(factory=list)
    session: SessionSaved | None = None
    logs: list[RunLogEntry] = attrs.field(factory=list)
    #: the current attempt's step results so far, by step, in the order they finished
    step_results: dict[uuid.UUID, StepResult] = attrs.field(factory=dict)
    #: whether ``step_results`` changed since they were last written
    steps_pending: bool = False
    cancelling: bool = False
    #: Set once the run's outcome is being stored: a renewal that finds the run finished is expected.
    finishing: bool = False
    #: the browser close, when the worker reported it before the outcome was stored
    closed: BrowserClosed | None = None
    #: the failed attempts tried again (the scenario's retries), oldest first
    attempts: list[RunAttempt] = attrs.field(factory=list)
    #: the task executing it
    task: asyncio.Task[None] | None = None


class _Executing(Container[uuid.UUID]):
    """The runs a scheduler executes, asked at the moment of each check (a reap may wait for locks).

    While a claim is under way every run counts: the one it just leased is not listed yet.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def __contains__(self, run_id: object) -> bool:
        return self._scheduler._claiming or run_id in self._scheduler._running


class Scheduler:
    """Claims runs with a lease and executes them on a :class:`WorkerPool`, at most ``pool.size`` at once.

    It is the service layer's run control: new runs wake it, cancels and session releases reach the
    pool when this process executes the run (other processes see the cancel flag in the store).
    ``sandbox`` and ``browser_args`` are the server's settings for its workers (``Settings``); each
    left None is read from its ``SCENARIOKIT_*`` variables, as the library's runs read them. The
    store's own files are hidden from the workers either way.
    """

    def __init__(
        self,
        services: Services,
        *,
        workers: int | None = None,
        browser: BrowserConfig | None = None,
        browser_args: tuple[str, ...] | None = None,
        sandbox: SandboxConfig | None = None,
        owner: str | None = None,
        poll_seconds: float = 1.0,
        finish_retry_delays: tuple[float, ...] = FINISH_RETRY_DELAYS,
    ) -> None:
        self.services = services
        sandbox = sandbox if sandbox is not None else SandboxConfig.from_env()
        hidden = store_paths(getattr(services.store, "url", None), services.context.settings.artifacts_dir)
        self.pool = WorkerPool(
            workers,
            browser=browser,
            browser_args=browser_args,
            session_keepalive=services.context.settings.session_keepalive_seconds,
            on_session_released=self.session_released,
            sandbox=attrs.evolve(sandbox, hidden=(*sandbox.hidden, *hidden)),
            on_browser_closed=self.browser_closed,
        )
        self.owner = owner or default_owner()
        self.poll_seconds = poll_seconds
        self.finish_retry_delays = finish_retry_delays
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(self.pool.size)
        self._running: dict[uuid.UUID, _Execution] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[Any]] = []
        self._session_runs: dict[uuid.UUID, uuid.UUID] = {}  # session id -> run id
        #: the timings stored with a finished run's outcome, until its browser's close is added to them:
        #: when they were kept (the monotonic clock), and they, in the order kept
        self._stored_timings: dict[uuid.UUID, tuple[float, RunTimings]] = {}
        self._no_browser: BrowserUnavailable | None = None
        self._claiming = False
        #: set by :meth:`drain`: no run is claimed any more
        self.draining = False
        #: the runs :meth:`drain` put back in the queue
        self.handed_back: list[uuid.UUID] = []
        #: the live authoring sessions held beside the runs (set by :meth:`start`)
        self.authoring: AuthoringHost | None = None

    @property
    def lease_seconds(self) -> float:
        return self.services.context.settings.lease_seconds

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the workers, reap runs left by dead ones, then claim, heartbeat and reap."""
        try:
            await self.pool.start()
        except BrowserUnavailable as exc:
            # Runs are still claimed, and fail at once saying why, rather than waiting forever.
            log.error("no browser: runs will fail until one is installed: %s", exc)
            self._no_browser = exc
        await self.services.runs.reap_expired()
        await self.services.runs.close_stale_sessions()
        self.services.set_control(self)
        settings = self.services.context.settings
        self.authoring = AuthoringHost(
            self.pool, max_live=settings.authoring_max, idle_seconds=settings.authoring_idle_seconds
        )
        self.services.set_authoring(self.authoring)  # live sessions are held where step code runs
        self._loops = [
            asyncio.create_task(self._claim_loop(), name="scenariokit-claim"),
            asyncio.create_task(self._heartbeat_loop(), name="scenariokit-heartbeat"),
            asyncio.create_task(self._reap_loop(), name="scenariokit-reap"),
            asyncio.create_task(self._cancel_loop(), name="scenariokit-cancel"),
        ]

    async def close(self) -> None:
        """Stop claiming and stop the workers; a run cut short is reaped as ``worker_lost`` later."""
        for task in self._loops:
            task.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._loops, *self._tasks, return_exceptions=True)
        self._loops = []
        if self.authoring is not None:
            self.services.set_authoring(None)
            await self.authoring.close()
            self.authoring = None
        if self._no_browser is None:
            await self.pool.close()

    async def drain(self, seconds: float, *, cut_short: asyncio.Event | None = None) -> list[uuid.UUID]:
        """Stop claiming, let the runs under way finish for up to ``seconds``, hand the rest back.

        A run handed back goes to the queue again, with no lease, and starts over on whichever
        scheduler sharing the store claims it next (docs/deployment.md, "Rolling restarts"): it is not
        failed as ``worker_lost``. ``cut_short`` (a second SIGTERM, say) ends the wait at once. Leases
        are renewed and cancels followed meanwhile; :meth:`close` still stops the workers afterwards.
        Returns the ids handed back.
        """
        self.draining = True
        await self._stop_claiming()
        pending = {task for task in self._tasks if not task.done()}
        if pending:
            log.info("draining: waiting up to %g s for %d run(s) under way", seconds, len(pending))
            await _wait_for_any(pending, seconds, cut_short)
        if cut_short is not None and cut_short.is_set():
            why = "its drain was cut short (stopped again)"
        else:
            why = f"the run did not finish within its drain of {seconds:g} s"
        return await self._hand_back_unfinished(why)

    async def _stop_claiming(self) -> None:
        """End the claim loop, never in the middle of a claim (a run it leased would have no executor)."""
        self._wake.set()
        claim = next((task for task in self._loops if task.get_name() == "scenariokit-claim"), None)
        while claim is not None and not claim.done():
            if not self._claiming:
                claim.cancel()
            await asyncio.wait({claim}, timeout=0.05)

    async def _hand_back_unfinished(self, why: str) -> list[uuid.UUID]:
        """Stop the runs still under way and put each back in the queue (the drain's end)."""
        unfinished = dict(self._running)
        if not unfinished:
            return []
        storing = {e.task for e in unfinished.values() if e.finishing and e.task is not None}
        if storing:  # its outcome is being written: a cancel would roll that back and run it twice
            await _wait_for_any(storing, FINISH_WAIT_SECONDS, None)
        unfinished = dict(self._running)
        tasks = [e.task for e in unfinished.values() if e.task is not None and not e.task.done()]
        for task in tasks:
            task.cancel()  # the pool abandons each run's worker: it is killed, never reports again
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.pool.retired()  # no step code of these runs goes on while another takes them
        handed: list[uuid.UUID] = []
        reason = (
            f"handed back to the queue: {self.owner} is stopping and {why}; "
            "the next scheduler to claim it starts it again"
        )
        for run_id, execution in unfinished.items():
            self._running.pop(run_id, None)
            await self._flush(execution)
            try:
                if await self.services.runs.hand_back(run_id, self.owner, reason):
                    handed.append(run_id)
            except Exception:  # its lease runs out instead, and a reaper fails it as worker_lost
                log.exception("handing run %s back to the queue failed", run_id)
        if handed:
            log.warning("draining: handed %d run(s) back to the queue: %s", len(handed),
                        ", ".join(str(run_id) for run_id in handed))  # fmt: skip
        self.handed_back.extend(handed)
        return handed

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- run control (called by the service layer) ---------------------------------------------

    def run_queued(self) -> None:
        self._wake.set()

    async def cancel(self, run_id: uuid.UUID) -> bool:
        """Stop a run this scheduler executes; False when it executes no such run.

        While a claim is under way the answer is True: the run may be the one being claimed, and the
        cancel loop stops it from the store's flag as soon as it is listed.
        """
        execution = self._running.get(run_id)
        if execution is None:
            return self._claiming
        if not execution.cancelling:
            execution.cancelling = True
            await self.pool.cancel(run_id)
        return True

    async def release_session(self, session_id: uuid.UUID) -> None:
        run_id = self._session_runs.pop(session_id, None)
        if run_id is not None:
            await self.pool.release_session(run_id)

    async def session_released(self, released: SessionReleased) -> None:
        """The pool closed a held session's browser: mark the session closed."""
        session = await self.services.runs.session_of_run(released.run_id)
        if session is not None:
            self._session_runs.pop(session.id, None)
            await self.services.runs.close_session(session.id)

    async def browser_closed(self, closed: BrowserClosed) -> None:
        """A finished run's browser closed: add that to its timings (with its outcome, or after)."""
        execution = self._running.get(closed.run_id)
        if execution is not None:
            execution.closed = closed  # its outcome is not stored yet: _execute writes both
            return
        kept = self._stored_timings.pop(closed.run_id, None)
        await self._record_close(closed, kept[1] if kept is not None else None)

    async def _record_close(self, closed: BrowserClosed, stored: RunTimings | None) -> None:
        """Add a browser close to the stored timings (``stored``: as this scheduler stored them)."""
        try:
            await self.services.runs.record_browser_close(closed.run_id, close_ms(closed), stored=stored)
        except Exception:
            log.exception("storing the browser close of run %s failed", closed.run_id)

    # --- loops ----------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self.draining:
            await self._slots.acquire()
            if self.draining:
                self._slots.release()
                return
            self._claiming = True
            claim_started = utcnow()
            try:
                claimed = await self.services.runs.claim(self.owner)
            except Exception:
                self._claiming = False
                self._slots.release()
                log.exception("claiming a run failed; retrying")
                await asyncio.sleep(self.poll_seconds)
                continue
            self._claiming = False
            if claimed is None:
                self._slots.release()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_seconds):
                        await self._wake.wait()
                continue
            run, job = claimed
            timeline = RunTimeline(created_at=run.created_at, claim_started=claim_started)
            execution = _Execution(run_id=run.id, job=job, timeline=timeline)
            self._running[run.id] = execution
            with about_run(run.id):  # the run's task, and what it starts, log with its runId
                task = asyncio.create_task(self._execute(execution), name=f"scenariokit-run-{run.id}")
            execution.task = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _execute(self, execution: _Execution) -> None:
        log.info("run %s claimed by %s", execution.run_id, self.owner)
        outcome = await self._attempt(execution)
        while (delay := self._retry_delay(execution, outcome)) is not None:
            outcome = await self._try_again(execution, outcome, delay)
        await self._finish(execution, outcome)
        log.info("run %s finished: %s", execution.run_id, outcome.status)

    def _retry_delay(self, execution: _Execution, outcome: RunFinished) -> float | None:
        """Seconds before the run is tried again, or None when ``outcome`` is the run's outcome."""
        retries = execution.job.retries
        tried = len(execution.attempts) + 1
        if outcome.status == "pass" or tried > retries.count or execution.cancelling:
            return None
        if outcome.error is not None and outcome.error.kind is RunErrorKind.CANCELLED:
            return None
        return retries.delay(tried)

    async def _try_again(self, execution: _Execution, failed: RunFinished, delay: float) -> RunFinished:
        """Keep the failed attempt, wait out the backoff (a cancel ends it), then try on a fresh worker."""
        number = len(execution.attempts) + 1
        attempt = RunAttempt(
            attempt=number,
            status=RunStatus.FAIL,
            error=failed.error,
            step_results=failed.step_results,
            started_at=failed.started_at,
            finished_at=failed.finished_at,
        )
        execution.attempts.append(attempt)
        execution.step_results, execution.steps_pending = {}, False  # the next attempt's start afresh
        if execution.session is not None:  # a failed attempt's session is not the run's
            execution.session = None
            with contextlib.suppress(Exception):
                await self.pool.release_session(execution.run_id)
        kind = failed.error.kind.value if failed.error else "fail"
        message = f"attempt {number} failed ({kind}); trying again in {delay:g} s in a fresh browser"
        execution.logs.append(RunLogEntry(run_id=execution.run_id, level="warning", message=message))
        try:
            await self._flush(execution)
            await self.services.runs.record_attempt(execution.run_id, attempt)
        except Exception:  # readers miss the attempt until the run finishes; the run goes on
            log.exception("storing attempt %d of run %s failed", number, execution.run_id)
        loop = asyncio.get_running_loop()
        until = loop.time() + delay
        # ``cancelling`` is a flag a cancel, the cancel loop or a lost lease sets: polled, as they poll
        while not execution.cancelling and (left := until - loop.time()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(min(left, CANCEL_POLL_SECONDS))
        if execution.cancelling:
            return self._failed(execution.job, "cancelled between attempts", kind=RunErrorKind.CANCELLED)
        await self._slots.acquire()
        return await self._attempt(execution)

    async def _attempt(self, execution: _Execution) -> RunFinished:
        """One attempt of the run on a fresh worker; it holds one of the scheduler's slots, released here."""
        stop_flushing = asyncio.Event()
        flusher = asyncio.create_task(self._flush_loop(execution, stop_flushing))
        outcome: RunFinished | None = None
        try:
            if self._no_browser is not None:
                raise self._no_browser
            outcome = await self.pool.execute(execution.job, lambda event: self._on_event(execution, event))
        except BrowserUnavailable as exc:
            outcome = self._failed(execution.job, str(exc))
        except Exception as exc:  # the pool itself failed: the run fails, not the scheduler
            log.exception("executing run %s failed", execution.run_id)
            outcome = self._failed(execution.job, f"{type(exc).__name__}: {exc}")
        finally:
            # the worker is done with: the slot goes to the next run before the last write of this one
            self._slots.release()
            stop_flushing.set()  # never cancelled: a cancel during a write would lose the lines it held
            await flusher
            if outcome is None:  # abandoned (the scheduler stops): what it logged is kept all the same
                await self._flush(execution)
        return outcome

    async def _finish(self, execution: _Execution, outcome: RunFinished) -> None:
        """Store the run's outcome with its timings and last log lines, then follow its browser's close.

        The outcome, the lines not written yet and the step results are one transaction; the browser's
        close goes in with them when the worker reported it first, else in one statement of its own.
        """
        written = execution.closed
        stored: RunTimings | None = None
        try:
            timings = execution.timeline.timings(outcome)
            written = execution.closed  # a close reported meanwhile goes in with the outcome
            stored = with_close(timings, written) if written else timings
            if not await self._store_outcome(execution, outcome, stored):
                stored = None
            if execution.session is not None:
                session = await self.services.runs.session_of_run(execution.run_id)
                if session is not None:
                    self._session_runs[session.id] = execution.run_id
        except Exception:
            log.exception("storing the outcome of run %s failed", execution.run_id)
        finally:
            closed = execution.closed
            self._running.pop(execution.run_id, None)  # from here browser_closed writes for itself
            self._drop_stale_timings()  # at every run's end, whether this one's are kept or not
            if stored is not None and closed is None:
                self._keep_timings(execution.run_id, stored)  # the close rewrites them as they are
        if closed is not None and closed is not written:
            await self._record_close(closed, stored)

    def _keep_timings(self, run_id: uuid.UUID, stored: RunTimings) -> None:
        """Keep a run's stored timings for its browser's close (:meth:`_drop_stale_timings` ends them)."""
        self._stored_timings[run_id] = (time.monotonic(), stored)

    def _drop_stale_timings(self) -> None:
        """Drop the timings kept longer than :data:`STORED_TIMINGS_SECONDS` for a close.

        A close follows its run's outcome within a second or two; a run whose worker was stopped
        without one (it crashed, or failed before its browser) never gets one, nor does a held
        session's run whose worker outlived it. What is dropped is only a shortcut: a close that comes
        after all reads the timings back from the store. Called as each run ends, also one whose close
        came with its outcome (and so keeps nothing): what one run kept never waits on the next to keep.
        """
        now = time.monotonic()
        for old, (kept_at, _) in list(self._stored_timings.items()):
            if now - kept_at < STORED_TIMINGS_SECONDS:
                break  # kept in order: the rest are younger
            del self._stored_timings[old]

    async def _store_outcome(
        self, execution: _Execution, outcome: RunFinished, timings: RunTimings | None
    ) -> bool:
        """Store the outcome (with the log lines not written yet), retrying with backoff; if it never
        goes in, fail the run with less. True when the outcome, with ``timings``, was stored.

        A run is never left ``in_progress`` by a write that failed: the smaller write of
        :meth:`RunService.fail` follows (retried too), and should even that fail, the lease is no
        longer renewed once this execution ends, so the reaper finishes the run.
        """
        execution.finishing = True
        entries, execution.logs = execution.logs, []
        execution.steps_pending = False  # the outcome holds every step's result
        delays = (*self.finish_retry_delays, None)
        failure = ""
        for attempt, delay in enumerate(delays, start=1):
            try:
                with execution.timeline.store_write():
                    await self.services.runs.finish(
                        execution.run_id,
                        outcome,
                        artifacts=execution.artifacts,
                        session=execution.session,
                        timings=timings,
                        earlier=execution.attempts,
                        logs=entries,
                    )
                return True
            except Exception as exc:
                if delay is None:
                    log.exception("storing the outcome of run %s failed %d times", execution.run_id, attempt)
                    failure = f"{type(exc).__name__}: {exc}"
                    break
                log.warning(
                    "storing the outcome of run %s failed (%s); retrying in %.1f s",
                    execution.run_id,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
        if execution.session is not None:  # no session record will point at its live context
            execution.session = None
            with contextlib.suppress(Exception):
                await self.pool.release_session(execution.run_id)
        message = f"the run ended ({outcome.status}) but storing its outcome failed: {failure}"
        with contextlib.suppress(Exception):  # its lines, if the store takes them on their own
            await self.services.runs.append_logs(entries)
        for delay in delays:
            try:
                await self.services.runs.fail(execution.run_id, RunErrorKind.ERROR, message)
                return False
            except Exception:
                if delay is None:
                    raise
                await asyncio.sleep(delay)
        return False

    async def _on_event(self, execution: _Execution, event: RunEvent) -> None:
        match event:
            case LogEvent():
                execution.logs.append(
                    RunLogEntry(
                        run_id=execution.run_id,
                        message=event.message,
                        level=event.level,
                        step_id=event.step_id,
                        at=event.at,
                    )
                )
            case StepFinished():  # written with the next flush, with the lines logged meanwhile
                execution.step_results.pop(event.result.step_id, None)
                execution.step_results[event.result.step_id] = event.result
                execution.steps_pending = True
            case ArtifactSaved():
                execution.artifacts.append(event.name)
            case SessionSaved():
                execution.session = event
            case _:
                pass  # StepStarted and RunFinished need nothing stored here

    async def _flush_loop(self, execution: _Execution, stop: asyncio.Event) -> None:
        """Write the run's progress every ``LOG_FLUSH_SECONDS`` until ``stop`` is set.

        What is left when it stops goes in with whatever the scheduler writes next for the run: its
        outcome (:meth:`_store_outcome`), or the failed attempt before a retry (:meth:`_try_again`).
        """
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOG_FLUSH_SECONDS):
                    await stop.wait()
            if stop.is_set():
                return
            await self._flush(execution)

    async def _flush(self, execution: _Execution) -> None:
        """Write the log lines and step results the run gained since the last write: one transaction."""
        entries, execution.logs = execution.logs, []
        results = list(execution.step_results.values()) if execution.steps_pending else None
        execution.steps_pending = False
        if entries or results is not None:
            try:
                with execution.timeline.store_write():
                    await self.services.runs.record_progress(execution.run_id, entries, results)
            except Exception:
                log.exception("writing the progress of run %s failed", execution.run_id)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            await self.renew_leases()

    async def renew_leases(self) -> None:
        """Extend the lease of every run this scheduler executes; stop those it lost.

        A run whose outcome is being stored is renewed too (storing may take retries), but a renewal
        that finds it finished is the expected end, not a lost lease. Renewals never touch a finished run.
        """
        for run_id, execution in list(self._running.items()):
            try:
                renewed = await self.services.runs.renew_lease(run_id, self.owner)
            except Exception:
                log.exception("renewing the lease on run %s failed", run_id)
                continue
            if renewed or execution.finishing or self._running.get(run_id) is not execution:
                continue
            # Someone reaped or cancelled it (we were too slow): stop executing a run we no longer own.
            log.warning("lost the lease on run %s; stopping it", run_id)
            execution.cancelling = True
            await self.pool.cancel(run_id)

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(max(self.lease_seconds / 2, 0.2))
            try:
                await self.reap()
                await self.services.runs.close_stale_sessions()
            except Exception:
                log.exception("reaping expired leases failed")

    async def reap(self) -> list[uuid.UUID]:
        """Finish the runs whose lease ran out and that nothing executes, this scheduler's own included."""
        return await self.services.runs.reap_expired(alive_owner=self.owner, executing=_Executing(self))

    async def _cancel_loop(self) -> None:
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            pending = [run_id for run_id, e in self._running.items() if not e.cancelling]
            if not pending:
                continue
            try:
                for run_id in await self.services.runs.cancel_requested(pending):
                    await self.cancel(run_id)
            except Exception:
                log.exception("reading cancel requests failed")

    @staticmethod
    def _failed(job: RunJob, message: str, *, kind: RunErrorKind = RunErrorKind.ERROR) -> RunFinished:
        now = utcnow()
        return RunFinished(
            status="fail",
            error=RunError(kind=kind, message=message),
            step_results=skip_remaining(job.steps, ()),
            started_at=now,
            finished_at=now,
        )
