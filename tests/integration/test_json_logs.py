"""`scenariokit serve --log-format json` (docs/deployment.md, "Logs"): every line of the log is one JSON
object; the access log names each request by its id, and lines about a run carry its ``runId``."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from ops_processes import SCENARIOKIT, Api, clean_env, cli, serving

pytestmark = pytest.mark.browser


def _lines(path: Path) -> list[dict[str, Any]]:
    objects = []
    for line in path.read_text().splitlines():
        value = json.loads(line)  # every line is one JSON object
        assert isinstance(value, dict), line
        objects.append(value)
    return objects


async def test_serve_writes_one_json_object_a_line_with_request_and_run_ids(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'scenariokit.db'}"
    with serving(url, tmp_path, "--workers", "1", "--log-format", "json", env=clean_env()) as (base, log):
        async with aiohttp.ClientSession() as http:
            api = Api(http, base)
            await api.wait_healthy()
            env = await api.call("POST", "/environments", {"name": "e", "data": {}})
            scenario = await api.call(
                "POST", "/scenarios", {"name": "s", "steps": [{"execCode": "print(1)"}]}
            )
            async with http.post(
                f"{base}/api/v1/run",
                json={"scenarioId": scenario["id"], "environmentId": env["id"]},
                headers={"X-Request-Id": "queue-run-1"},
            ) as response:
                assert response.headers["X-Request-Id"] == "queue-run-1"
                run = await response.json()
            await api.wait_run(run["id"])
            async with http.get(f"{base}/api/v1/nowhere") as missing:
                generated = missing.headers["X-Request-Id"]
                assert missing.status == 404 and len(generated) == 32
    lines = _lines(log)
    assert all({"at", "level", "logger", "message"} <= set(line) for line in lines)
    access = [line for line in lines if line["logger"] == "aiohttp.access"]
    queued = [line for line in access if line.get("requestId") == "queue-run-1"]
    assert len(queued) == 1
    assert (queued[0]["method"], queued[0]["path"], queued[0]["status"]) == ("POST", "/api/v1/run", 201)
    assert queued[0]["durationMs"] >= 0
    assert any(line.get("requestId") == generated and line.get("status") == 404 for line in access)
    about_run = [line for line in lines if line.get("runId") == run["id"]]
    assert about_run, "lines about the run carry its runId"
    assert all("runId" not in line for line in access)


def test_the_worker_logs_json_too(tmp_path: Path) -> None:
    env = clean_env(SCENARIOKIT_LOG_FORMAT="json")
    url = f"sqlite:///{tmp_path / 'scenariokit.db'}"
    with (tmp_path / "worker.stderr").open("wb") as errors:
        worker = subprocess.Popen(
            [*SCENARIOKIT, "worker", "--workers", "1", "--database-url", url],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=errors,
        )  # fmt: skip
    try:
        assert worker.stdout is not None
        assert b"scenariokit worker" in worker.stdout.readline()  # started: the store and its key made
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=120)
    lines = _lines(tmp_path / "worker.stderr")
    assert any(
        line["logger"] == "scenariokit.storage.secrets" and "created a new secret key" in line["message"]
        for line in lines
    )


def test_an_unknown_log_format_is_refused(tmp_path: Path) -> None:
    answer = cli("worker", "--log-format", "xml", env=clean_env(), cwd=tmp_path)
    assert answer.returncode == 2 and "--log-format" in answer.stderr
    answer = cli("worker", env=clean_env(SCENARIOKIT_LOG_FORMAT="xml"), cwd=tmp_path)
    assert answer.returncode == 2 and "SCENARIOKIT_LOG_FORMAT='xml' is invalid" in answer.stderr
