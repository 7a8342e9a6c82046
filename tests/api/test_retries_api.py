"""A scenario's ``retries`` and a run's ``attempts`` and ``flaky`` through REST (docs/monitoring.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from api_support import API, Client, both_backends, created, problem_of

from scenariokit.domain.job import RunFinished
from scenariokit.domain.model import (
    RunAttempt,
    RunError,
    RunErrorKind,
    RunStatus,
    StepResult,
    StepStatus,
    utcnow,
)


@both_backends
async def test_retries_are_stored_read_and_patched_as_a_whole(client: Client) -> None:
    retries = {"count": 2, "backoff": "exponential", "backoffSeconds": 1.5}
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout", "retries": retries})
    assert scenario["retries"] == retries
    read = await (await client.get(f"{API}/scenarios/{scenario['id']}")).json()
    assert read["retries"] == retries

    renamed = await (await client.patch(f"{API}/scenarios/{scenario['id']}", json={"name": "x"})).json()
    assert renamed["retries"] == retries  # a PATCH that does not name it keeps it
    patched = await client.patch(f"{API}/scenarios/{scenario['id']}", json={"retries": {"count": 1}})
    assert (await patched.json())["retries"] == {"count": 1, "backoff": "fixed", "backoffSeconds": 0.0}
    put = await client.put(f"{API}/scenarios/{scenario['id']}", json={"name": "replaced"})
    assert (await put.json())["retries"]["count"] == 0  # PUT is the full new state


BAD_RETRIES: list[tuple[Any, str, str]] = [
    ({"count": 6}, "retries.count", "from 0 to 5"),
    ({"count": -1}, "retries.count", "from 0 to 5"),
    ({"count": "2"}, "retries.count", "whole number"),
    ({"count": True}, "retries.count", "whole number"),
    ({"count": 1.5}, "retries.count", "whole number"),
    ({"backoff": "random"}, "retries.backoff", "fixed, linear, exponential"),
    ({"backoffSeconds": 601}, "retries.backoffSeconds", "from 0 to 600"),
    ({"backoffSeconds": -0.5}, "retries.backoffSeconds", "from 0 to 600"),
    ({"backoffSeconds": "1"}, "retries.backoffSeconds", "a number"),
    ({"maxRetries": 3}, "retries.maxRetries", "unknown field"),
    (3, "retries", "JSON object"),
    (None, "retries", "JSON object"),
]


@both_backends
@pytest.mark.parametrize(("retries", "field", "words"), BAD_RETRIES)
async def test_bad_retries_are_refused_by_field_and_nothing_is_stored(
    client: Client, retries: Any, field: str, words: str
) -> None:
    refused = await problem_of(
        await client.post(f"{API}/scenarios", json={"name": "x", "retries": retries}), 400
    )
    assert field in refused["errors"] and words in refused["errors"][field], refused
    assert (await (await client.get(f"{API}/scenarios")).json())["total"] == 0

    kept = await created(client, f"{API}/scenarios", {"name": "kept", "retries": {"count": 1}})
    for method in (client.patch, client.put):
        answer = await method(f"{API}/scenarios/{kept['id']}", json={"name": "changed", "retries": retries})
        assert field in (await problem_of(answer, 400))["errors"]
    read = await (await client.get(f"{API}/scenarios/{kept['id']}")).json()
    assert (read["name"], read["retries"]["count"]) == ("kept", 1)


async def _queued_run(client: Client) -> dict[str, Any]:
    environment = await created(client, f"{API}/environments", {"name": "e", "data": {"url": "http://x"}})
    scenario = await created(
        client, f"{API}/scenarios", {"name": "s", "retries": {"count": 1}, "steps": [{"execCode": "pass"}]}
    )
    return await created(
        client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    )


def _outcome(status: str, step_id: uuid.UUID, *, error: RunError | None = None) -> RunFinished:
    now = utcnow()
    result = StepResult(step_id=step_id, order=1, status=StepStatus(status), started_at=now, duration_ms=5)
    return RunFinished(
        status=status,  # type: ignore[arg-type]
        error=error,
        step_results=(result,),
        started_at=now,
        finished_at=now + timedelta(milliseconds=5),
    )


@both_backends
async def test_a_run_passing_after_a_failed_attempt_shows_both_attempts_and_is_flaky(
    client: Client, services: Any
) -> None:
    run = await _queued_run(client)
    assert run["attempts"] == [] and run["flaky"] is False
    step_id = uuid.UUID(run["stepResults"][0]["stepId"]) if run["stepResults"] else uuid.uuid4()
    failed = _outcome("fail", step_id, error=RunError(kind=RunErrorKind.ASSERTION, message="no"))
    first = RunAttempt(
        attempt=1,
        status=RunStatus.FAIL,
        error=failed.error,
        step_results=failed.step_results,
        started_at=failed.started_at,
        finished_at=failed.finished_at,
    )
    run_id = uuid.UUID(run["id"])
    await services.runs.record_attempt(run_id, first)
    between = await (await client.get(f"{API}/run/{run['id']}")).json()
    assert between["status"] == "in_progress" and [a["attempt"] for a in between["attempts"]] == [1]

    await services.runs.finish(run_id, _outcome("pass", step_id), earlier=[first])
    body = await (await client.get(f"{API}/run/{run['id']}")).json()
    assert body["status"] == "pass" and body["flaky"] is True
    assert [(a["attempt"], a["status"]) for a in body["attempts"]] == [(1, "fail"), (2, "pass")]
    assert body["attempts"][0]["error"] == {"kind": "assertion", "message": "no", "stepId": None}
    assert body["attempts"][1]["stepResults"] == body["stepResults"]
    listed = await (await client.get(f"{API}/run")).json()
    assert listed["items"][0]["flaky"] is True and len(listed["items"][0]["attempts"]) == 2


@both_backends
async def test_a_run_of_one_attempt_lists_itself_as_its_only_attempt(client: Client, services: Any) -> None:
    run = await _queued_run(client)
    await services.runs.finish(uuid.UUID(run["id"]), _outcome("pass", uuid.uuid4()))
    body = await (await client.get(f"{API}/run/{run['id']}")).json()
    assert body["flaky"] is False
    (only,) = body["attempts"]
    assert (only["attempt"], only["status"], only["startedAt"]) == (1, "pass", body["startedAt"])
