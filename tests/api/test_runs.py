"""Runs: queueing, reading with a paged and filtered log, cancelling, and their files."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from api_support import API, Client, both_backends, created, problem_of

from scenariokit.domain.job import RunFinished
from scenariokit.domain.model import RunLogEntry, RunTimings, StepResult, StepStatus, StepTiming, utcnow
from scenariokit.services import Services

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
RUN_FIELDS = {
    *("id", "scenarioId", "scenario", "environmentId", "environment", "saveSession", "sessionId", "session"),
    *("status", "error", "stepResults", "artifacts", "createdAt", "startedAt", "finishedAt", "durationMs"),
    *("attempts", "flaky", "batchId", "scheduleId", "browser", "scenarioRevision"),
}


@pytest.fixture
async def targets(client: Client) -> dict[str, Any]:
    """A scenario with two steps and an environment to run it against."""
    environment = await created(client, f"{API}/environments", {"name": "local", "data": {"url": "http://x"}})
    steps = [{"execCode": "pass", "title": "one"}, {"execCode": "pass", "title": "two"}]
    scenario = await created(client, f"{API}/scenarios", {"name": "smoke", "steps": steps})
    return {"scenario": scenario, "environment": environment}


async def _run(client: Client, targets: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = {"scenarioId": targets["scenario"]["id"], "environmentId": targets["environment"]["id"], **extra}
    return await created(client, f"{API}/run", body)


@both_backends
async def test_create_read_and_cancel_a_run(client: Client, targets: dict[str, Any]) -> None:
    run = await _run(client, targets, saveSession=True)
    assert run["status"] == "in_progress" and run["saveSession"] is True
    assert set(run) == RUN_FIELDS | {"logs", "timings", "traceViewerUrl"}
    assert run["timings"] is None  # no scheduler has executed it yet
    assert run["scenario"] == {"id": targets["scenario"]["id"], "name": "smoke"}
    assert run["environment"] == targets["environment"]
    assert run["error"] is None and run["session"] is None and run["durationMs"] is None

    read = await client.get(f"{API}/run/{run['id']}")
    assert read.status == 200
    assert (await read.json())["logs"] == {"items": [], "total": 0, "page": 1, "limit": 100}

    cancelled = await client.post(f"{API}/run/{run['id']}/cancel")
    assert cancelled.status == 200
    body = await cancelled.json()
    assert body["status"] == "fail" and body["error"]["kind"] == "cancelled"
    assert [r["status"] for r in body["stepResults"]] == ["skipped", "skipped"]
    assert body["finishedAt"] is not None and body["durationMs"] is not None

    problem = await problem_of(await client.post(f"{API}/run/{run['id']}/cancel"), 409)
    assert "finished" in problem["detail"]


async def test_scenario_is_accepted_for_scenario_id(client: Client, targets: dict[str, Any]) -> None:
    body = {"scenario": targets["scenario"]["id"], "environmentId": targets["environment"]["id"]}
    run = await created(client, f"{API}/run", body)
    assert run["scenarioId"] == targets["scenario"]["id"]


async def test_run_creation_validates_its_references(client: Client, targets: dict[str, Any]) -> None:
    scenario_id = targets["scenario"]["id"]
    problem = await problem_of(await client.post(f"{API}/run", json={"scenarioId": scenario_id}), 400)
    assert "environmentId" in problem["errors"]
    body = {"scenarioId": str(uuid.uuid4()), "environmentId": targets["environment"]["id"]}
    assert "scenarioId" in (await problem_of(await client.post(f"{API}/run", json=body), 400))["errors"]
    body = {"scenarioId": scenario_id, "environmentId": str(uuid.uuid4())}
    assert "environmentId" in (await problem_of(await client.post(f"{API}/run", json=body), 400))["errors"]
    body = {"scenarioId": scenario_id, "environmentId": targets["environment"]["id"], "saveSession": "yes"}
    assert "saveSession" in (await problem_of(await client.post(f"{API}/run", json=body), 400))["errors"]


async def test_run_logs_are_paged_and_filtered(
    client: Client, services: Services, targets: dict[str, Any]
) -> None:
    run = await _run(client, targets)
    run_id = uuid.UUID(run["id"])
    lines = [f"step {i}: clicked" if i % 5 else f"step {i}: Timeout waiting" for i in range(1, 26)]
    await services.runs.append_logs([RunLogEntry(run_id=run_id, message=line) for line in lines])

    page = (await (await client.get(f"{API}/run/{run_id}", params={"limit": "10", "page": "2"})).json())[
        "logs"
    ]
    assert (page["total"], page["page"], page["limit"]) == (25, 2, 10)
    assert [entry["message"] for entry in page["items"]] == lines[10:20]
    assert set(page["items"][0]) == {"message", "level", "stepId", "at", "seq"}

    found = (await (await client.get(f"{API}/run/{run_id}", params={"q": "TIMEOUT"})).json())["logs"]
    assert found["total"] == 5
    assert all("Timeout" in entry["message"] for entry in found["items"])

    await problem_of(await client.get(f"{API}/run/{run_id}", params={"limit": "1001"}), 400)
    await problem_of(await client.get(f"{API}/run/{run_id}", params={"orderBy": "seq"}), 400)


async def test_missing_run_gives_404(client: Client) -> None:
    missing = uuid.uuid4()
    await problem_of(await client.get(f"{API}/run/{missing}"), 404)
    await problem_of(await client.post(f"{API}/run/{missing}/cancel"), 404)
    await problem_of(await client.get(f"{API}/run/{missing}/artifacts/shot.png"), 404)
    await problem_of(await client.get(f"{API}/run/nope"), 400)


async def _finished_run_with_files(
    client: Client, services: Services, targets: dict[str, Any], artifacts_dir: Path
) -> str:
    run = await _run(client, targets)
    folder = artifacts_dir / run["id"]
    folder.mkdir(parents=True)
    (folder / "step-1.png").write_bytes(PNG)
    (folder / "trace.zip").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    (artifacts_dir / "secret.txt").write_text("not an artifact")
    now = utcnow()
    outcome = RunFinished(status="pass", error=None, step_results=(), started_at=now, finished_at=now)
    await services.runs.finish(
        uuid.UUID(run["id"]), outcome, artifacts=["step-1.png", "trace.zip", "gone.png"]
    )
    return str(run["id"])


async def test_artifacts_are_streamed_with_their_content_type(
    client: Client, services: Services, targets: dict[str, Any], artifacts_dir: Path
) -> None:
    run_id = await _finished_run_with_files(client, services, targets, artifacts_dir)
    shot = await client.get(f"{API}/run/{run_id}/artifacts/step-1.png")
    assert shot.status == 200 and shot.content_type == "image/png" and await shot.read() == PNG
    trace = await client.get(f"{API}/run/{run_id}/artifacts/trace.zip")
    assert trace.status == 200 and trace.content_type == "application/zip"
    detail = await (await client.get(f"{API}/run/{run_id}")).json()
    files = f"{API}/run/{run_id}/artifacts"
    assert detail["artifacts"] == [
        {"name": "step-1.png", "url": f"{files}/step-1.png", "contentType": "image/png"},
        {"name": "trace.zip", "url": f"{files}/trace.zip", "contentType": "application/zip"},
        {"name": "gone.png", "url": f"{files}/gone.png", "contentType": "image/png"},
    ]
    trace_url = f"{API}/run/{run_id}/artifacts/trace.zip".replace("/", "%2F")
    assert detail["traceViewerUrl"] == f"/trace/index.html?trace={trace_url}"
    for artifact in detail["artifacts"][:2]:  # each url serves its file
        assert (await client.get(artifact["url"])).content_type == artifact["contentType"]


async def test_artifact_404s_and_traversal_is_refused(
    client: Client, services: Services, targets: dict[str, Any], artifacts_dir: Path
) -> None:
    run_id = await _finished_run_with_files(client, services, targets, artifacts_dir)
    base = f"{API}/run/{run_id}/artifacts"
    await problem_of(await client.get(f"{base}/other.png"), 404)  # not recorded by the run
    await problem_of(await client.get(f"{base}/gone.png"), 404)  # recorded, but the file is gone
    for name in ("..%2Fsecret.txt", "%2E%2E%2Fsecret.txt", "..%5Csecret.txt", ".hidden", "a%00b"):
        response = await client.get(f"{base}/{name}")
        assert response.status in (400, 404), name
        assert b"not an artifact" not in await response.read()
    traversal = await client.get(f"{API}/run/{run_id}/artifacts/../../secret.txt")  # the client normalizes it
    assert traversal.status in (400, 404) and b"not an artifact" not in await traversal.read()


async def test_a_scenario_with_a_run_in_progress_is_not_deleted_until_the_run_ends(
    client: Client, targets: dict[str, Any]
) -> None:
    run = await _run(client, targets)
    scenario_url = f"{API}/scenarios/{targets['scenario']['id']}"

    problem = await problem_of(await client.delete(scenario_url), 409)
    assert "1 run(s) in progress" in problem["detail"]
    assert (await client.get(f"{API}/run/{run['id']}")).status == 200

    assert (await client.post(f"{API}/run/{run['id']}/cancel")).status == 200
    assert (await client.delete(scenario_url)).status == 204
    await problem_of(await client.get(f"{API}/run/{run['id']}"), 404)


async def test_the_run_detail_shows_its_timings_and_lists_leave_them_out(
    client: Client, services: Services, targets: dict[str, Any]
) -> None:
    run = await _run(client, targets)
    run_id = uuid.UUID(run["id"])
    step_ids = [uuid.UUID(step["id"]) for step in targets["scenario"]["steps"]]
    results = tuple(
        StepResult(step_id=step_id, order=order, status=StepStatus.PASS, started_at=utcnow(), duration_ms=7)
        for order, step_id in enumerate(step_ids, 1)
    )
    now = utcnow()
    outcome = RunFinished(status="pass", error=None, step_results=results, started_at=now, finished_at=now)
    timings = RunTimings(
        queued_ms=1,
        claim_ms=2,
        job_to_worker_ms=3,
        browser_ready_ms=4,
        context_and_page_ms=5,
        steps_ms=15,
        steps=tuple(StepTiming(step_id=r.step_id, order=r.order, duration_ms=7) for r in results),
        after_steps_ms=0,
        store_writes_ms=6,
    )
    await services.runs.finish(run_id, outcome, timings=timings)
    await services.runs.record_browser_close(run_id, 30)

    detail = await (await client.get(f"{API}/run/{run_id}")).json()
    assert detail["timings"] == {
        "queuedMs": 1,
        "claimMs": 2,
        "jobToWorkerMs": 3,
        "browserReadyMs": 4,
        "contextAndPageMs": 5,
        "stepsMs": 15,
        "steps": [
            {"stepId": str(step_ids[0]), "order": 1, "durationMs": 7},
            {"stepId": str(step_ids[1]), "order": 2, "durationMs": 7},
        ],
        "afterStepsMs": 0,
        "storeWritesMs": 6,
        "browserCloseMs": 30,
    }
    listed = await (await client.get(f"{API}/run")).json()
    assert [item["id"] for item in listed["items"]] == [str(run_id)]
    assert "timings" not in listed["items"][0]
