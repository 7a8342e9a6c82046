"""No run stays ``in_progress``: runs that cannot start, orphaned leases and cancels of orphans end.

Service-level checks on both databases; tests/integration/test_no_run_stuck.py drives the scheduler.
"""

from __future__ import annotations

import asyncio
import uuid

import attrs
import sqlalchemy as sa
from cryptography.fernet import Fernet

from scenariokit.domain.model import RunErrorKind, RunStatus, StepStatus
from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit.services import Services
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t


async def _scenario(services: Services, **fields: object) -> tuple[uuid.UUID, uuid.UUID]:
    env = await services.environments.create({"name": "env", "data": {"url": "http://127.0.0.1:9"}})
    scenario = await services.scenarios.create(
        {"name": "s", "steps": [{"execCode": "pass"}, {"execCode": "pass"}], **fields}
    )
    return scenario.id, env.id


async def _queue(services: Services) -> uuid.UUID:
    scenario_id, env_id = await _scenario(services)
    return (await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})).id


async def test_a_run_whose_credential_cannot_be_decrypted_fails_saying_why(
    services: Services, store: SqlStore
) -> None:
    cred = await services.credentials.create({"name": "admin", "username": "u", "secret": "pw"})
    scenario_id, env_id = await _scenario(
        services, credentials=[{"credentialId": str(cred.id), "alias": "admin"}]
    )
    # The secret as another key wrote it: this store's keys cannot read it.
    foreign = Fernet(Fernet.generate_key()).encrypt(b"pw").decode()
    async with store.engine.begin() as conn:
        await conn.execute(
            sa.update(t.credentials).where(t.credentials.c.id == cred.id).values(secret_encrypted=foreign)
        )
    run = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})
    good = await _queue(services)

    claimed = await services.runs.claim("w")

    assert claimed is not None and claimed[0].id == good, "the next run is claimed instead"
    detail = await services.runs.get(run.id)
    assert detail.run.status is RunStatus.FAIL and detail.run.error is not None
    assert detail.run.error.kind is RunErrorKind.ERROR
    assert "could not be started" in detail.run.error.message
    assert (
        f"credential {cred.id}" in detail.run.error.message
        and "cannot be decrypted" in detail.run.error.message
    )
    assert [r.status for r in detail.run.step_results] == [StepStatus.SKIPPED, StepStatus.SKIPPED]
    assert detail.logs is not None and detail.run.error.message in [
        line.message for line in detail.logs.items
    ]
    assert await services.runs.reap_expired() == [], "no lease was left behind"


async def test_a_run_whose_scenario_vanished_after_queueing_fails_at_claim(
    services: Services, store: SqlStore
) -> None:
    run_id = await _queue(services)
    async with store.engine.begin() as conn:  # as if the environment went while the run waited
        await conn.execute(sa.update(t.runs).where(t.runs.c.id == run_id).values(environment_id=uuid.uuid4()))
    assert await services.runs.claim("w") is None
    run = (await services.runs.get(run_id)).run
    assert run.status is RunStatus.FAIL and run.error is not None
    assert run.error.message == "the run could not be started: the run's environment was deleted"


async def test_a_scheduler_reaps_its_own_lease_that_nothing_executes(services: Services) -> None:
    run_id = await _queue(services)
    services.context.settings = attrs.evolve(services.context.settings, lease_seconds=0.05)
    scheduler = Scheduler(services, workers=1, owner="this-scheduler")
    # Claimed under the scheduler's name, but never handed to its pool (say, the claim's answer was lost).
    assert await services.runs.claim(scheduler.owner) is not None
    await asyncio.sleep(0.1)

    assert await scheduler.reap() == [run_id]

    run = (await services.runs.get(run_id)).run
    assert run.status is RunStatus.FAIL and run.error is not None
    assert run.error.kind is RunErrorKind.WORKER_LOST and "this-scheduler lost it" in run.error.message
    assert [r.status for r in run.step_results] == [StepStatus.SKIPPED, StepStatus.SKIPPED]


async def test_cancelling_a_run_whose_lease_ran_out_finishes_it_at_once(services: Services) -> None:
    run_id = await _queue(services)
    services.context.settings = attrs.evolve(services.context.settings, lease_seconds=0.05)
    assert await services.runs.claim("gone-worker") is not None
    await asyncio.sleep(0.1)

    cancelled = await services.runs.cancel(run_id)

    assert cancelled.status is RunStatus.FAIL and cancelled.error is not None
    assert cancelled.error.kind is RunErrorKind.CANCELLED and "gone-worker" in cancelled.error.message
    assert (await services.runs.get(run_id)).run == cancelled
    assert await services.runs.reap_expired() == []


async def test_cancelling_a_run_its_own_scheduler_lost_finishes_it_at_once(services: Services) -> None:
    run_id = await _queue(services)
    scheduler = Scheduler(services, workers=1, owner="here")
    services.set_control(scheduler)
    assert await services.runs.claim("here") is not None  # leased to this process, not executed by it

    cancelled = await services.runs.cancel(run_id)

    assert cancelled.status is RunStatus.FAIL and cancelled.error is not None
    assert cancelled.error.kind is RunErrorKind.CANCELLED and "here no longer did" in cancelled.error.message


async def test_cancelling_a_run_a_live_worker_executes_leaves_the_stop_to_that_worker(
    services: Services,
) -> None:
    run_id = await _queue(services)
    assert await services.runs.claim("live-elsewhere") is not None

    answered = await services.runs.cancel(run_id)

    assert answered.status is RunStatus.IN_PROGRESS
    assert await services.runs.cancel_requested([run_id]) == {run_id}
    assert await services.runs.renew_lease(run_id, "live-elsewhere")
