"""Workers claim runs with leases: each run once, and a lost worker's run ends as worker_lost."""

from __future__ import annotations

import asyncio
import uuid

import attrs
import pytest

from json_services import json_services
from scenariokit.domain.job import RunJob
from scenariokit.domain.model import RunErrorKind, RunStatus
from scenariokit.services import RunSettings, Services
from scenariokit.storage.opening import open_store


async def _queue(services: Services, count: int) -> list[uuid.UUID]:
    env = await services.environments.create({"name": "env", "data": {"url": "http://127.0.0.1:9"}})
    scenario = await services.scenarios.create({"name": "s", "steps": [{"execCode": "pass"}]})
    return [
        (await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})).id
        for _ in range(count)
    ]


async def test_concurrent_claimers_take_each_run_exactly_once(services: Services, database_url: str) -> None:
    queued = await _queue(services, 30)
    # Three independent stores (connection pools), as three worker processes would have.
    stores = [await open_store(database_url, secret_key="test-secret-key") for _ in range(3)]
    claimed: list[uuid.UUID] = []

    async def worker(name: str, svc: Services) -> None:
        while (result := await svc.runs.claim(name)) is not None:
            claimed.append(result[0].id)

    try:
        await asyncio.gather(*(worker(f"w{i}", json_services(Services(s))) for i, s in enumerate(stores)))
    finally:
        for s in stores:
            await s.close()
    assert sorted(claimed) == sorted(queued)


async def test_claim_resolves_what_the_run_needs(services: Services) -> None:
    env = await services.environments.create({"name": "env", "data": {"url": "http://x"}})
    cred = await services.credentials.create({"name": "c", "username": "u", "secret": "pw"})
    await services.snippets.create({"alias": "greet", "title": "Greet", "code": "return args[0]"})
    scenario = await services.scenarios.create(
        {
            "name": "s",
            "timeoutSeconds": 9,
            "steps": [{"execCode": "a", "timeoutSeconds": 3}, {"execCode": "await runSnippet('greet', [1])"}],
            "credentials": [{"credentialId": str(cred.id), "alias": "me"}],
        }
    )
    run = await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    claimed = await services.runs.claim("w")
    assert claimed is not None
    claimed_run, job = claimed
    assert claimed_run.id == run.id and claimed_run.started_at is not None
    assert [s.timeout_seconds for s in job.steps] == [3, 30]
    assert job.run_timeout == 9 and job.env_data == {"url": "http://x"}
    assert [(c.alias, c.username, c.secret) for c in job.credentials] == [("me", "u", "pw")]
    assert job.snippets == {"greet": "return args[0]"}


SNIPPETS = {
    "login": "await runSnippet('fill', ['#user', args[0]])\nawait run_snippet(alias='submit')",
    "fill": "await page.fill(args[0], args[1])",
    "submit": "await page.click('button')",
    "logout": "await page.click('#logout')",
    "banner": "await runSnippet('b' + 'anner2')",
}


async def _job(services: Services, *codes: str) -> RunJob:
    """The job a worker is given for a run of a scenario with steps of ``codes``, :data:`SNIPPETS` stored."""
    env = await services.environments.create({"name": "env", "data": {"url": "http://x"}})
    for alias, code in SNIPPETS.items():
        await services.snippets.create({"alias": alias, "title": alias, "code": code})
    scenario = await services.scenarios.create({"name": "s", "steps": [{"execCode": c} for c in codes]})
    await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    claimed = await services.runs.claim("w")
    assert claimed is not None
    return claimed[1]


async def test_a_job_carries_the_snippets_its_steps_call_and_those_these_call(services: Services) -> None:
    job = await _job(services, "await runSnippet('login', ['ada'])", "log('no snippet')")

    assert job.snippets == {alias: SNIPPETS[alias] for alias in ("login", "fill", "submit")}


@pytest.mark.parametrize(
    "code",
    [
        "await runSnippet('log' + 'out')",  # an alias computed in the step
        "await runSnippet('banner')",  # a snippet that computes one
        "go = runSnippet\nawait go('logout')",
        "await globals()['runSnippet']('logout')",
        "import sys",
        "await log.__self__.run_snippet('logout')",
    ],
)
async def test_a_job_carries_every_snippet_when_the_code_may_call_any(services: Services, code: str) -> None:
    job = await _job(services, "log(1)", code)

    assert job.snippets == SNIPPETS


async def test_a_job_calling_an_alias_not_stored_carries_every_snippet(services: Services) -> None:
    # 'common-login' may be a plugin's, whose code (read in the worker) may call any stored snippet;
    # or nobody's, and the run's message names the nearest stored aliases
    job = await _job(services, "await runSnippet('fill', ['#q', 'x'])", "await runSnippet('common-login')")

    assert job.snippets == SNIPPETS


async def test_a_run_whose_lease_expires_ends_as_worker_lost(services: Services) -> None:
    (run_id,) = await _queue(services, 1)
    services.context.settings = attrs.evolve(services.context.settings, lease_seconds=0.05)
    assert await services.runs.claim("dead-worker") is not None
    await asyncio.sleep(0.1)
    assert await services.runs.reap_expired() == [run_id]
    run = (await services.runs.get(run_id)).run
    assert run.status is RunStatus.FAIL and run.error is not None
    assert run.error.kind is RunErrorKind.WORKER_LOST and "dead-worker" in run.error.message
    assert not await services.runs.renew_lease(run_id, "dead-worker")


async def test_a_live_worker_keeps_its_lease(services: Services) -> None:
    (run_id,) = await _queue(services, 1)
    # Three renewals outlast one lease; each comes well within it, even on a loaded machine.
    services.context.settings = RunSettings(lease_seconds=1.0)
    assert await services.runs.claim("live") is not None
    for _ in range(3):
        await asyncio.sleep(0.4)
        assert await services.runs.renew_lease(run_id, "live")
    assert await services.runs.reap_expired() == []


async def test_a_scheduler_never_reaps_the_late_lease_of_a_run_it_executes(services: Services) -> None:
    (run_id,) = await _queue(services, 1)
    services.context.settings = attrs.evolve(services.context.settings, lease_seconds=0.05)
    assert await services.runs.claim("busy-but-alive") is not None
    await asyncio.sleep(0.1)
    assert await services.runs.reap_expired(alive_owner="busy-but-alive", executing={run_id}) == []
    assert await services.runs.renew_lease(run_id, "busy-but-alive"), "a late renewal still holds the run"
