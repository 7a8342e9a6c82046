"""Cancelling over HTTP a run whose worker is gone answers it finished, not ``in_progress``."""

from __future__ import annotations

import asyncio

import attrs
from api_support import API, Client, both_backends

from scenariokit.services import Services


@both_backends
async def test_cancelling_an_orphaned_run_answers_it_cancelled_at_once(
    client: Client, services: Services
) -> None:
    env = await services.environments.create({"name": "env", "data": {"url": "http://127.0.0.1:9"}})
    scenario = await services.scenarios.create({"name": "s", "steps": [{"execCode": "pass"}]})
    run = await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    services.context.settings = attrs.evolve(services.context.settings, lease_seconds=0.05)
    assert await services.runs.claim("a-worker-that-died") is not None
    await asyncio.sleep(0.1)

    response = await client.post(f"{API}/run/{run.id}/cancel")

    assert response.status == 200
    body = await response.json()
    assert body["status"] == "fail" and body["error"]["kind"] == "cancelled"
    assert "a-worker-that-died" in body["error"]["message"]
    assert [r["status"] for r in body["stepResults"]] == ["skipped"]
    assert (await (await client.get(f"{API}/run/{run.id}")).json())["status"] == "fail"
