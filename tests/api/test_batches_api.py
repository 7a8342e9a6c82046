"""Many environments: ``environmentIds`` on ``POST /api/v1/run`` queues a batch (docs/monitoring.md)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from api_support import API, Client, both_backends, created, problem_of


async def _targets(client: Client, environments: int = 3) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scenario = await created(client, f"{API}/scenarios", {"name": "smoke", "steps": [{"execCode": "pass"}]})
    envs = [
        await created(client, f"{API}/environments", {"name": f"env-{i}", "data": {"url": f"http://h{i}"}})
        for i in range(environments)
    ]
    return scenario, envs


@both_backends
async def test_three_environments_queue_a_batch_listed_by_its_id(client: Client) -> None:
    scenario, envs = await _targets(client)
    ids = [env["id"] for env in reversed(envs)]
    response = await client.post(f"{API}/run", json={"scenarioId": scenario["id"], "environmentIds": ids})
    assert response.status == 201, await response.text()
    batch = await response.json()
    assert response.headers["Location"] == f"{API}/run?batchId={batch['batchId']}"
    assert [run["environment"]["id"] for run in batch["runs"]] == ids  # in the order asked
    assert {run["batchId"] for run in batch["runs"]} == {batch["batchId"]}
    assert all(run["status"] == "in_progress" for run in batch["runs"])

    single = await created(client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": ids[0]})
    assert single["batchId"] is None
    listed = await (await client.get(f"{API}/run", params={"batchId": batch["batchId"]})).json()
    assert listed["total"] == 3
    assert {run["id"] for run in listed["items"]} == {run["id"] for run in batch["runs"]}
    other = await (await client.get(f"{API}/run", params={"batchId": str(uuid.uuid4())})).json()
    assert other["total"] == 0


BAD_BATCHES: list[tuple[Any, str, str]] = [
    ([], "environmentIds", "1 to 20"),
    (["x"], "environmentIds[0]", "not a UUID"),
    ("abc", "environmentIds", "must be a list"),
    ([str(uuid.uuid4())] * 2, "environmentIds", "twice"),
    ([str(uuid.uuid4()) for _ in range(21)], "environmentIds", "1 to 20"),
]


@both_backends
@pytest.mark.parametrize(("ids", "field", "words"), BAD_BATCHES)
async def test_a_bad_batch_is_refused_by_field_and_queues_nothing(
    client: Client, ids: Any, field: str, words: str
) -> None:
    scenario, _ = await _targets(client, 1)
    answer = await client.post(f"{API}/run", json={"scenarioId": scenario["id"], "environmentIds": ids})
    errors = (await problem_of(answer, 400))["errors"]
    assert field in errors and words in errors[field], errors
    assert (await (await client.get(f"{API}/run")).json())["total"] == 0


@both_backends
async def test_a_batch_naming_a_missing_environment_or_both_fields_queues_nothing(client: Client) -> None:
    scenario, envs = await _targets(client, 2)
    missing = str(uuid.uuid4())
    body = {"scenarioId": scenario["id"], "environmentIds": [envs[0]["id"], missing]}
    errors = (await problem_of(await client.post(f"{API}/run", json=body), 400))["errors"]
    assert errors == {"environmentIds[1]": f"no environment with id {missing}"}
    both = {**body, "environmentIds": [envs[0]["id"]], "environmentId": envs[1]["id"]}
    errors = (await problem_of(await client.post(f"{API}/run", json=both), 400))["errors"]
    assert "environmentIds" in errors and "not both" in errors["environmentIds"]
    assert (await (await client.get(f"{API}/run")).json())["total"] == 0
    bad_query = await problem_of(await client.get(f"{API}/run", params={"batchId": "nope"}), 400)
    assert "batchId" in bad_query["errors"]
