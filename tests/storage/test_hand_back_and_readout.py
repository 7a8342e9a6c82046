"""A drained run goes back to the queue; the operators' readout (queue, last outcomes) comes from the store.

On SQLite and PostgreSQL (the ``services`` fixture runs each test on both).
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from scenariokit.domain.model import RunErrorKind, RunStatus, StepResult, StepStatus, utcnow
from scenariokit.services import Services

REASON = "handed back to the queue: w1 is stopping"


async def _queue(services: Services, name: str = "s", count: int = 1) -> tuple[uuid.UUID, list[uuid.UUID]]:
    env = await services.environments.create({"name": f"env-{uuid.uuid4().hex[:6]}", "data": {}})
    scenario = await services.scenarios.create({"name": name, "steps": [{"execCode": "pass"}]})
    runs = [
        (await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})).id
        for _ in range(count)
    ]
    return scenario.id, runs


async def test_a_run_handed_back_is_queued_again_and_another_scheduler_claims_it(services: Services) -> None:
    _, (run_id,) = await _queue(services)
    claimed = await services.runs.claim("w1")
    assert claimed is not None
    step = claimed[1].steps[0]
    result = StepResult(step_id=step.id, order=1, title=None, status=StepStatus.PASS, started_at=utcnow())
    await services.runs.record_progress(run_id, [], [result])

    assert not await services.runs.hand_back(run_id, "someone-else", REASON), "only the lease holder may"
    assert await services.runs.hand_back(run_id, "w1", REASON)
    detail = await services.runs.get(run_id)
    run = detail.run
    assert run.status is RunStatus.IN_PROGRESS and run.error is None
    assert run.step_results == () and run.attempts == () and run.started_at is None
    assert [line.message for line in detail.logs.items] == ["claimed by w1", REASON], "its log is kept"
    assert (await services.operations.readout()).queue.depth == 1
    assert not await services.runs.renew_lease(run_id, "w1"), "the old owner holds nothing any more"

    again = await services.runs.claim("w2")
    assert again is not None and again[0].id == run_id and again[0].started_at is not None
    assert await services.runs.reap_expired() == [], "a run handed back is never reaped as worker_lost"


async def test_a_finished_run_is_never_handed_back(services: Services) -> None:
    _, (run_id,) = await _queue(services)
    assert await services.runs.claim("w1") is not None
    await services.runs.fail(run_id, RunErrorKind.ERROR, "over")
    assert not await services.runs.hand_back(run_id, "w1", REASON)
    assert (await services.runs.get(run_id)).run.status is RunStatus.FAIL


async def test_the_readout_counts_only_unclaimed_runs_and_dates_the_oldest(services: Services) -> None:
    empty = await services.operations.readout()
    assert (empty.queue.depth, empty.oldest_queued_seconds, empty.schedule_lag_seconds) == (0, 0.0, 0.0)
    _, runs = await _queue(services, count=3)
    assert await services.runs.claim("w1") is not None  # the oldest is taken
    readout = await services.operations.readout()
    assert readout.queue.depth == 2
    second = (await services.runs.get(runs[1])).run
    assert readout.queue.oldest_queued_at == second.created_at
    assert readout.oldest_queued_seconds >= 0


async def test_each_scenarios_last_outcome_is_its_newest_finished_run(services: Services) -> None:
    first, runs = await _queue(services, "first", count=3)
    second, (other,) = await _queue(services, "second")
    await _queue(services, "never run")
    for _ in runs[:2]:
        await services.runs.claim("w1")
    await services.runs.fail(runs[0], RunErrorKind.ASSERTION, "no")
    await services.runs.cancel(runs[1])  # the newest finished run of "first"; runs[2] is still queued
    await services.runs.cancel(other)
    outcomes = {o.scenario_id: o for o in (await services.operations.readout()).outcomes}
    assert set(outcomes) == {first, second}
    assert outcomes[first].status is RunStatus.FAIL and outcomes[first].scenario_name == "first"
    assert outcomes[first].duration_seconds is not None and outcomes[first].duration_seconds >= 0

    await services.scenarios.delete(second)
    await services.scenarios.update(first, {"name": "renamed"})
    outcomes = {o.scenario_id: o for o in (await services.operations.readout()).outcomes}
    assert set(outcomes) == {first} and outcomes[first].scenario_name == "renamed"


async def test_the_schedule_lag_is_how_late_the_earliest_fire_is(services: Services) -> None:
    scenario_id, _ = await _queue(services)
    env = await services.environments.create({"name": "lag", "data": {}})
    await services.schedules.create(
        {"scenarioId": str(scenario_id), "environmentIds": [str(env.id)], "intervalSeconds": 3600}
    )
    readout = await services.operations.readout()
    assert readout.queue.next_fire_at is not None and readout.schedule_lag_seconds == 0.0
    later = type(readout)(
        at=readout.queue.next_fire_at + timedelta(seconds=90), queue=readout.queue, outcomes=()
    )
    assert later.schedule_lag_seconds == 90.0
