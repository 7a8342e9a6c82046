"""What the scheduler's store calls for one run cost in transactions and statements, on both stores.

A run's progress (new log lines, its step results so far) is one transaction per flush; its outcome,
the lines not written yet and the ``run_finished`` hook's streak are one; its browser's close, added
afterwards, is one UPDATE that reads nothing. Counted with the store's own counters
(:class:`~scenariokit.storage.ports.StoreActivity`) and the statements the engines send.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any, ClassVar

import attrs
import pytest
from test_write_statements import sent

from json_services import json_services
from scenariokit.domain.job import RunFinished
from scenariokit.domain.model import (
    Run,
    RunError,
    RunErrorKind,
    RunLogEntry,
    RunStatus,
    RunStreak,
    RunTimings,
    Scenario,
    StepResult,
    StepStatus,
    utcnow,
)
from scenariokit.formats.queries import LogQuery, RunQuery
from scenariokit.plugins import HookRelay, get_plugin_manager, hookimpl
from scenariokit.services import Services
from scenariokit.storage.sqlalchemy import SqlStore


@attrs.define
class _Listener:
    """A plugin that keeps what ``run_finished`` gave it."""

    heard: list[tuple[RunStatus, str, RunStreak]] = attrs.field(factory=list)

    @hookimpl
    def scenariokit_run_finished(self, run: Run, scenario: Scenario, streak: RunStreak) -> None:
        self.heard.append((run.status, scenario.name, streak))


@attrs.define
class _RunCounter:
    """A plugin that takes the finished run alone, as the server's run metrics do."""

    heard: list[RunStatus] = attrs.field(factory=list)

    @hookimpl
    def scenariokit_run_finished(self, run: Run) -> None:
        self.heard.append(run.status)


@attrs.define
class _StreakWatcher:
    """A plugin that takes the run and its streak, not its scenario."""

    heard: list[RunStreak] = attrs.field(factory=list)

    @hookimpl
    def scenariokit_run_finished(self, run: Run, streak: RunStreak) -> None:
        self.heard.append(streak)


def _services(store: SqlStore, *plugins: object) -> Any:
    manager = get_plugin_manager(load_entry_points=False)
    for plugin in plugins:
        manager.register(plugin)
    return json_services(Services(store, plugins=manager))


async def _claimed(services: Any) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """A run of a two-step scenario, claimed: its id and its steps' ids."""
    env = await services.environments.create({"name": "env", "data": {"url": "http://127.0.0.1:9"}})
    scenario = await services.scenarios.create(
        {"name": "two steps", "steps": [{"execCode": "a = 1"}, {"execCode": "b = 2"}]}
    )
    run = await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    claimed = await services.runs.claim("w")
    assert claimed is not None and claimed[0].id == run.id
    return run.id, [step.id for step in scenario.steps]


async def _passed_with_timings(services: Any) -> tuple[uuid.UUID, RunTimings]:
    """A claimed run of :func:`_claimed`, finished ``pass`` with timings: its id and those timings."""
    run_id, _ = await _claimed(services)
    now = utcnow()
    outcome = RunFinished(status="pass", error=None, step_results=(), started_at=now, finished_at=now)
    timings = RunTimings(claim_ms=3, store_writes_ms=4)
    await services.runs.finish(run_id, outcome, timings=timings)
    return run_id, timings


def _streak_reads(statements: list[tuple[str, Any]]) -> list[str]:
    """The reads of a run's streak (the statuses of the runs before it) among ``statements``."""
    return [sql for sql, _ in statements if sql.startswith("SELECT runs.status FROM runs ")]


def _passed(step_id: uuid.UUID, order: int) -> StepResult:
    return StepResult(
        step_id=step_id, order=order, status=StepStatus.PASS, started_at=utcnow(), duration_ms=5
    )


def _writes(statements: list[tuple[str, Any]]) -> list[str]:
    """The writes, one per statement: SQLite traces a statement run for several rows once per row."""
    writes = [
        sql.split(" (")[0].split(" SET")[0] for sql, _ in statements if sql.startswith(("INSERT", "UPDATE"))
    ]
    return [write for write, _ in itertools.groupby(writes)]


async def test_a_claim_is_one_update_returning_the_run_and_writes_its_first_log_line_with_it(
    store: SqlStore,
) -> None:
    services = _services(store)
    env = await services.environments.create({"name": "env", "data": {"url": "http://127.0.0.1:9"}})
    scenario = await services.scenarios.create({"name": "s", "steps": [{"execCode": "pass"}]})
    queued = await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    before = store.activity.snapshot()

    with sent(store) as statements:
        claimed = await services.runs.claim("owner-1")

    assert claimed is not None and claimed[0].id == queued.id and claimed[0].started_at is not None
    done = store.activity.since(before)
    assert (done.writes, done.commits) == (1, 1), "the claim and its log line: one transaction"
    runs_read = [sql for sql, _ in statements if sql.startswith("SELECT") and " FROM runs " in f"{sql} "]
    assert runs_read == [], "the claimed row comes back with the UPDATE itself"
    assert _writes(statements) == ["UPDATE runs", "INSERT INTO run_logs"]
    logs = (await services.runs.get(queued.id, LogQuery())).logs.items
    assert [line.message for line in logs] == ["claimed by owner-1"]


async def test_a_runs_progress_is_one_transaction_that_reads_nothing(store: SqlStore) -> None:
    services = _services(store)
    run_id, steps = await _claimed(services)
    lines = [RunLogEntry(run_id=run_id, message=f"line {i}") for i in range(3)]
    before = store.activity.snapshot()

    with sent(store) as statements:
        await services.runs.record_progress(run_id, lines, [_passed(steps[0], 1)])
        await services.runs.record_progress(run_id, [], None)  # nothing new: no transaction at all

    done = store.activity.since(before)
    assert (done.writes, done.commits, done.reads) == (1, 1, 0)
    assert not [sql for sql, _ in statements if sql.startswith("SELECT")]
    assert _writes(statements) == ["INSERT INTO run_logs", "UPDATE runs"]
    detail = await services.runs.get(run_id, LogQuery())
    assert [r.step_id for r in detail.run.step_results] == [steps[0]]
    assert [line.message for line in detail.logs.items][-3:] == ["line 0", "line 1", "line 2"]


async def test_progress_never_rewrites_the_steps_of_a_finished_run(store: SqlStore) -> None:
    services = _services(store)
    run_id, steps = await _claimed(services)
    now = utcnow()
    results = (_passed(steps[0], 1), _passed(steps[1], 2))
    outcome = RunFinished(status="pass", error=None, step_results=results, started_at=now, finished_at=now)
    await services.runs.finish(run_id, outcome)

    await services.runs.record_progress(run_id, [], [])  # a late flush

    assert len((await services.runs.get(run_id)).run.step_results) == 2


async def test_an_outcome_its_last_lines_and_the_hooks_streak_are_one_transaction(store: SqlStore) -> None:
    listener = _Listener()
    services = _services(store, listener)
    run_id, steps = await _claimed(services)
    now = utcnow()
    failed = attrs.evolve(_passed(steps[1], 2), status=StepStatus.FAIL, error="no")
    results = (_passed(steps[0], 1), failed)
    error = RunError(kind=RunErrorKind.ASSERTION, message="no", step_id=steps[1])
    outcome = RunFinished(status="fail", error=error, step_results=results, started_at=now, finished_at=now)
    last = [RunLogEntry(run_id=run_id, message="the last line")]
    before = store.activity.snapshot()

    await services.runs.finish(run_id, outcome, logs=last, timings=RunTimings(claim_ms=1))

    done = store.activity.since(before)
    assert (done.writes, done.commits, done.reads) == (1, 1, 0), "no unit of work after the commit"
    # the streak, read in the transaction after the outcome, counts this very run
    assert listener.heard == [(RunStatus.FAIL, "two steps", RunStreak(failures=1, failures_before=0))]
    detail = await services.runs.get(run_id, LogQuery())
    assert detail.run.status is RunStatus.FAIL and len(detail.run.step_results) == 2
    assert detail.logs.items[-1].message == "the last line"


@pytest.mark.parametrize("listening", [False, True], ids=["no-listener", "listener-of-the-run-alone"])
async def test_finishing_reads_the_run_alone_unless_a_listener_takes_its_scenario_or_streak(
    store: SqlStore, listening: bool
) -> None:
    # no plugin at all (the built-in defaults implement no run hook), or one that takes `run` alone
    counter = _RunCounter()
    services = _services(store, *([counter] if listening else []))
    run_id, _ = await _claimed(services)
    now = utcnow()
    outcome = RunFinished(status="pass", error=None, step_results=(), started_at=now, finished_at=now)

    with sent(store) as statements:
        await services.runs.finish(run_id, outcome)

    reads = [sql for sql, _ in statements if sql.startswith("SELECT")]
    assert len(reads) == 1 and " FROM runs " in f"{reads[0]} ", "only the run itself is read"

    second, _ = await _claimed(services)  # a run failed by the service (cancel, lost lease, no start)
    with sent(store) as statements:
        await services.runs.fail(second, RunErrorKind.ERROR, "it could not start")

    assert not _streak_reads(statements)
    assert counter.heard == ([RunStatus.PASS, RunStatus.FAIL] if listening else [])


async def test_a_listener_taking_the_streak_gets_it_and_the_scenario_is_not_read(store: SqlStore) -> None:
    watcher, counter = _StreakWatcher(), _RunCounter()
    services = _services(store, watcher, counter)
    run_id, _ = await _claimed(services)
    now = utcnow()
    error = RunError(kind=RunErrorKind.ASSERTION, message="no")
    outcome = RunFinished(status="fail", error=error, step_results=(), started_at=now, finished_at=now)

    with sent(store) as statements:
        await services.runs.finish(run_id, outcome)

    assert watcher.heard == [RunStreak(failures=1, failures_before=0)] and counter.heard == [RunStatus.FAIL]
    reads = [sql for sql, _ in statements if sql.startswith("SELECT")]
    assert len(reads) == 2 and len(_streak_reads(statements)) == 1, "the run, then its streak"

    second, _ = await _claimed(services)
    with sent(store) as statements:
        await services.runs.fail(second, RunErrorKind.ERROR, "it could not start")

    assert (
        watcher.heard[-1] == RunStreak(failures=1, failures_before=0) and len(_streak_reads(statements)) == 1
    )


def test_a_listener_of_the_scenario_is_never_handed_none_for_it() -> None:
    # a run whose scenario is gone: the hook is not fired while an implementation takes the scenario
    class ScenarioKeeper:
        handed: ClassVar[list[object]] = []

        @hookimpl
        def scenariokit_run_finished(self, run: Run, scenario: object) -> None:
            self.handed.append(scenario)

    run = Run(scenario_id=uuid.uuid4(), environment_id=uuid.uuid4(), status=RunStatus.PASS)
    counter = _RunCounter()
    alone, both = (get_plugin_manager(load_entry_points=False) for _ in range(2))
    alone.register(counter)
    both.register(_RunCounter())
    both.register(ScenarioKeeper())

    HookRelay(alone).run_finished(run=run, scenario=None, streak=None)
    HookRelay(both).run_finished(run=run, scenario=None, streak=None)

    assert counter.heard == [RunStatus.PASS] and ScenarioKeeper.handed == []


async def test_a_browser_close_added_to_stored_timings_is_one_update_that_reads_nothing(
    store: SqlStore,
) -> None:
    services = _services(store)
    run_id, timings = await _passed_with_timings(services)
    before = store.activity.snapshot()

    with sent(store) as statements:
        await services.runs.record_browser_close(run_id, 25, stored=timings)

    done = store.activity.since(before)
    assert (done.writes, done.commits, done.reads) == (1, 1, 0)
    assert not [sql for sql, _ in statements if sql.startswith("SELECT")]
    assert _writes(statements) == ["UPDATE runs"]
    stored = (await services.runs.get(run_id)).run.timings
    assert stored == attrs.evolve(timings, browser_close_ms=25)


async def test_stored_timings_are_never_written_to_a_run_in_progress(store: SqlStore) -> None:
    services = _services(store)
    run_id, _ = await _claimed(services)

    await services.runs.record_browser_close(run_id, 25, stored=RunTimings(claim_ms=3))

    assert (await services.runs.get(run_id)).run.timings is None


async def test_a_list_without_timings_reads_no_timings_and_the_detail_still_has_them(store: SqlStore) -> None:
    # What REST, MCP and the report's index list: they show no timings, so a page of them leaves the
    # column out of its statement (a third of what a page of runs read), and each run's is None.
    services = _services(store)
    run_id, timings = await _passed_with_timings(services)

    with sent(store) as statements:
        lean = await services.runs.list(RunQuery(), timings=False)
    whole = await services.runs.list(RunQuery())
    of_scenario = await services.runs.list_for_scenario(whole.items[0].run.scenario_id, timings=False)

    pages = [sql for sql, _ in statements if sql.startswith("SELECT") and " FROM runs" in sql]
    assert pages and all("timings" not in sql for sql in pages), pages
    assert [detail.run.timings for detail in lean.items] == [None]
    assert [detail.run.timings for detail in of_scenario.items] == [None]
    assert [detail.run.timings for detail in whole.items] == [timings]  # the library's list: unchanged
    # everything else a list shows is the same either way
    assert [attrs.evolve(d.run, timings=None) for d in whole.items] == [d.run for d in lean.items]
    assert (await services.runs.get(run_id)).run.timings == timings
