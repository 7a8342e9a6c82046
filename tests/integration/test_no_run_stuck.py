"""No run stays ``in_progress``: the real scheduler, real worker processes and Chromium, both databases.

Faults are injected into the real store: a wrapper around its units of work makes the commit that
stores a run's outcome fail (or pause) as a database that went away would.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from json_services import json_services
from scenariokit.domain.model import Run, RunErrorKind, RunStatus, StepStatus
from scenariokit.runner.parent import scheduler as scheduler_module
from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit.services import RunSettings, Services
from scenariokit.storage import ports
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t

pytestmark = pytest.mark.browser  # every test here runs scenarios in Chromium

STEP = "print('hello from a step')"


class FaultyStore:
    """The real store; a commit that writes a finished run matching ``when`` fails ``failures`` times,
    and (once it goes through) is followed by a pause of ``pause_after`` seconds."""

    def __init__(
        self,
        store: SqlStore,
        *,
        failures: int = 0,
        when: Callable[[Run], bool] = lambda run: True,
        pause_after: float = 0.0,
    ) -> None:
        self.store = store
        self.url = store.url
        self.failures = failures
        self.when = when
        self.pause_after = pause_after
        self.refused = 0

    def unit_of_work(self, *, readonly: bool = False) -> _FaultyUnitOfWork:
        return _FaultyUnitOfWork(self, self.store.unit_of_work(readonly=readonly))

    async def ping(self) -> None:
        await self.store.ping()

    async def close(self) -> None:
        await self.store.close()


class _FaultyRuns:
    def __init__(self, runs: ports.RunRepository, uow: _FaultyUnitOfWork) -> None:
        self._runs = runs
        self._uow = uow

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runs, name)

    async def update(self, item: Run) -> None:
        if item.finished and self._uow.faulty.when(item):
            self._uow.finishing = True
        await self._runs.update(item)


class _FaultyUnitOfWork:
    def __init__(self, faulty: FaultyStore, inner: ports.UnitOfWork) -> None:
        self.faulty = faulty
        self.inner = inner
        self.finishing = False
        self.committed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def __aenter__(self) -> _FaultyUnitOfWork:
        await self.inner.__aenter__()
        self.runs = _FaultyRuns(self.inner.runs, self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.inner.__aexit__(exc_type, exc, tb)
        if self.committed and self.faulty.pause_after:  # the connection is back in the pool meanwhile
            await asyncio.sleep(self.faulty.pause_after)

    async def commit(self) -> None:
        if self.finishing and self.faulty.failures > 0:
            self.faulty.failures -= 1
            self.faulty.refused += 1
            raise ConnectionResetError("injected: the connection to the database was lost")
        await self.inner.commit()
        self.committed = self.finishing


@pytest.fixture
def run_settings(tmp_path: Path) -> RunSettings:
    return RunSettings(artifacts_dir=tmp_path / "artifacts", lease_seconds=3.0)


async def _scheduler(services: Services, **options: Any) -> Scheduler:
    scheduler = Scheduler(services, workers=1, poll_seconds=0.2, **options)
    await scheduler.start()
    return scheduler


@pytest.fixture
async def running(services: Services, run_settings: RunSettings) -> AsyncIterator[Scheduler]:
    """A started scheduler with one worker process over the plain store."""
    services.context.settings = run_settings
    scheduler = await _scheduler(services)
    try:
        yield scheduler
    finally:
        await scheduler.close()


async def _scenario(services: Services, **fields: Any) -> tuple[uuid.UUID, uuid.UUID]:
    env = await services.environments.create({"name": "env", "data": {"url": "about:blank"}})
    scenario = await services.scenarios.create({"name": "s", "steps": [{"execCode": STEP}] * 2, **fields})
    return scenario.id, env.id


async def _queue(services: Services) -> uuid.UUID:
    scenario_id, env_id = await _scenario(services)
    run = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})
    return run.id


async def test_a_run_the_scheduler_cannot_start_fails_saying_why_and_the_next_one_runs(
    running: Scheduler, services: Services, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    credential = await services.credentials.create({"name": "admin", "username": "u", "secret": "pw"})
    link = {"credentialId": str(credential.id), "alias": "admin"}
    scenario_id, env_id = await _scenario(services, credentials=[link])
    foreign = Fernet(Fernet.generate_key()).encrypt(b"pw").decode()
    async with store.engine.begin() as conn:  # a secret the server's keys cannot read
        await conn.execute(sa.update(t.credentials).values(secret_encrypted=foreign))
    with caplog.at_level(logging.WARNING, logger="scenariokit"):
        stuck = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})
        failed = await services.runs.wait(stuck.id, 60)
        after = await services.runs.wait(await _queue(services), 90)

    assert failed.run.status is RunStatus.FAIL and failed.run.error is not None
    assert failed.run.error.kind is RunErrorKind.ERROR
    assert failed.run.error.message.startswith("the run could not be started: the secret of credential")
    assert [r.status for r in failed.run.step_results] == [StepStatus.SKIPPED] * 2
    assert after.run.status is RunStatus.PASS, after.run.error
    assert "claiming a run failed" not in caplog.text


async def test_a_failed_outcome_write_is_retried_until_it_is_stored(
    services: Services, store: SqlStore, run_settings: RunSettings
) -> None:
    faulty = FaultyStore(store, failures=2)
    flaky = json_services(Services(faulty, settings=run_settings))  # type: ignore[arg-type]
    scheduler = await _scheduler(flaky, finish_retry_delays=(0.2, 0.2, 0.2))
    try:
        run_id = await _queue(flaky)
        done = await services.runs.wait(run_id, 90)
    finally:
        await scheduler.close()

    assert faulty.refused == 2
    assert done.run.status is RunStatus.PASS, done.run.error
    assert [r.status for r in done.run.step_results] == [StepStatus.PASS] * 2


async def test_an_outcome_that_never_stores_fails_the_run_instead_of_leaving_it_in_progress(
    services: Services, store: SqlStore, run_settings: RunSettings
) -> None:
    faulty = FaultyStore(store, failures=1000, when=lambda run: run.status is RunStatus.PASS)
    flaky = json_services(Services(faulty, settings=run_settings))  # type: ignore[arg-type]
    scheduler = await _scheduler(flaky, finish_retry_delays=(0.1, 0.1))
    try:
        scenario_id, env_id = await _scenario(flaky)
        run = await flaky.runs.create(
            {"scenarioId": str(scenario_id), "environmentId": str(env_id), "saveSession": True}
        )
        done = await services.runs.wait(run.id, 90)
        held = scheduler.pool.held_sessions()
    finally:
        await scheduler.close()

    assert held == [], "the live context of a session no record points at is released"
    assert (await services.sessions.list()).total == 0
    assert faulty.refused == 3, "the full outcome was tried three times"
    assert done.run.status is RunStatus.FAIL and done.run.error is not None
    assert done.run.error.kind is RunErrorKind.ERROR
    assert done.run.error.message.startswith("the run ended (pass) but storing its outcome failed: ")
    assert "connection to the database was lost" in done.run.error.message
    assert done.logs is not None and done.run.error.message in [line.message for line in done.logs.items]


async def test_the_heartbeat_leaves_a_run_that_just_finished_alone(
    services: Services, store: SqlStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Heartbeats every 0.2 s; each finish pauses 1.5 s between its commit and the scheduler noticing.
    settings = RunSettings(artifacts_dir=tmp_path / "artifacts", lease_seconds=0.6)
    paused = json_services(Services(FaultyStore(store, pause_after=1.5), settings=settings))  # type: ignore[arg-type]
    scheduler = await _scheduler(paused)
    try:
        with caplog.at_level(logging.WARNING, logger="scenariokit"):
            run_ids = [await _queue(paused) for _ in range(2)]
            done = [await services.runs.wait(run_id, 90) for run_id in run_ids]
            await asyncio.sleep(1.0)  # heartbeats after the last finish
            await scheduler.renew_leases()
    finally:
        await scheduler.close()

    assert [d.run.status for d in done] == [RunStatus.PASS, RunStatus.PASS], [d.run.error for d in done]
    assert "lost the lease" not in caplog.text
    async with store.unit_of_work(readonly=True) as uow:
        assert [await uow.runs.lease(run_id) for run_id in run_ids] == [None, None]
        stored = [await uow.runs.get(run_id) for run_id in run_ids]
    assert [run.finished_at for run in stored if run] == [d.run.finished_at for d in done]


async def _held_session_run(
    running: Scheduler, services: Services, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, str], Run]:
    """A passed run that saved its session, its timings kept (none are kept longer than no time at all),
    and the body that queues another run of its scenario."""
    monkeypatch.setattr(scheduler_module, "STORED_TIMINGS_SECONDS", 0.0)
    scenario_id, env_id = await _scenario(services)
    queue = {"scenarioId": str(scenario_id), "environmentId": str(env_id)}
    held = await services.runs.create({**queue, "saveSession": True})
    assert (await services.runs.wait(held.id, 90)).run.status is RunStatus.PASS
    assert held.id in running._stored_timings  # its browser lives on with the session
    return queue, held


async def test_timings_kept_for_a_browser_close_that_never_comes_are_dropped(
    running: Scheduler, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run that saves its session keeps its worker (and browser) for the session: no close follows its
    # outcome, so the timings kept for one would stay as long as the scheduler runs.
    queue, held = await _held_session_run(running, services, monkeypatch)
    after = await services.runs.create(queue)
    assert (await services.runs.wait(after.id, 90)).run.status is RunStatus.PASS
    for _ in range(100):  # its close is recorded once the worker is stopped, just after the outcome
        if after.id not in running._stored_timings:
            break
        await asyncio.sleep(0.05)
    assert running._stored_timings == {}  # the held run's were dropped as the next run ended
    timings = (await services.runs.get(held.id)).run.timings
    assert timings is not None and timings.claim_ms is not None  # what was stored stays stored


async def test_timings_kept_are_dropped_also_when_the_next_run_keeps_none(
    running: Scheduler, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The next run's browser closes while its outcome is being stored: its close goes in with the outcome
    # and it keeps nothing, yet the held run's timings must go as it ends, not wait for a run that keeps.
    queue, _ = await _held_session_run(running, services, monkeypatch)
    store_outcome = running._store_outcome
    closed_first: list[bool] = []

    async def slow_store(execution: Any, outcome: Any, timings: Any) -> bool:
        for _ in range(100):  # until the worker has reported its browser's close
            if execution.closed is not None:
                break
            await asyncio.sleep(0.05)
        closed_first.append(execution.closed is not None)
        return await store_outcome(execution, outcome, timings)

    monkeypatch.setattr(running, "_store_outcome", slow_store)
    after = await services.runs.create(queue)
    assert (await services.runs.wait(after.id, 90)).run.status is RunStatus.PASS
    assert closed_first == [True]
    for _ in range(100):  # the run's end follows its stored outcome by a moment
        timings = (await services.runs.get(after.id)).run.timings
        if not running._stored_timings and timings is not None and timings.browser_close_ms is not None:
            break
        await asyncio.sleep(0.05)
    assert running._stored_timings == {}  # the held run's dropped, the next run's never kept
    assert timings is not None and timings.browser_close_ms is not None  # its close stored all the same
