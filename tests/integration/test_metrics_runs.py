"""``/metrics`` of a real ``scenariokit serve`` while real runs execute in Chromium.

The counters and the run-duration histogram move with each run the server finishes, the store's
gauges give each scenario's last outcome, and the workers' gauge sees a run under way.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_drain import STARTUP_SECONDS, http, processes  # noqa: F401 (fixtures)
from test_worker_processes import Api, Processes, _free_port

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]


async def scrape(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``, by name and labels, parsed by prometheus_client's parser."""
    async with api.session.get(f"{api.base}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def runs(metrics: dict[Any, float], status: str, kind: str) -> float:
    return metrics[("scenariokit_runs_total", (("error_kind", kind), ("status", status)))]


async def test_the_counters_move_with_real_runs(
    processes: Any,  # noqa: F811
    http: aiohttp.ClientSession,  # noqa: F811
    site: Any,
    tmp_path: Path,
) -> None:
    procs: Processes = processes(f"sqlite:///{tmp_path / 'metrics.db'}")
    port = _free_port()
    api = Api(http, f"http://127.0.0.1:{port}")
    server = procs.serve(port)
    await api.wait_healthy(server, STARTUP_SECONDS)
    before = await scrape(api)
    assert runs(before, "pass", "none") == 0 and runs(before, "fail", "assertion") == 0

    passing, env_id = await api.scenario(site.url, "await page.goto(helpers.getEnvUrl())")
    failing = (
        await api.call("POST", "/scenarios", {"name": "broken", "steps": [{"execCode": "assert 1 == 2"}]})
    )["id"]
    slow = (
        await api.call(
            "POST",
            "/scenarios",
            {"name": "slow", "steps": [{"execCode": "import asyncio\nawait asyncio.sleep(5)"}]},
        )
    )["id"]
    for scenario_id in (passing, failing):
        run = await api.wait_run(await api.queue(scenario_id, env_id), 180)
        assert run["status"] == ("pass" if scenario_id == passing else "fail"), run["error"]

    after = await scrape(api)
    assert runs(after, "pass", "none") == 1
    assert runs(after, "fail", "assertion") == 1
    assert after[("scenariokit_run_duration_seconds_count", ())] == 2
    assert after[("scenariokit_run_duration_seconds_sum", ())] > 0
    last = {
        labels: value for (name, labels), value in after.items() if name == "scenariokit_scenario_last_status"
    }
    assert last == {
        (("scenario", "visit"), ("scenario_id", passing)): 1,
        (("scenario", "broken"), ("scenario_id", failing)): 0,
    }
    assert after[("scenariokit_queue_depth", ())] == 0

    # While a run executes, one worker is busy.
    slow_run = await api.queue(slow, env_id)
    await api.wait_run(slow_run, 120, until="claimed")
    deadline = time.monotonic() + 60
    busy = 0.0
    while time.monotonic() < deadline and not busy:
        busy = (await scrape(api))[("scenariokit_workers", (("state", "busy"),))]
        await asyncio.sleep(0.2)
    assert busy == 1
    assert (await api.wait_run(slow_run, 120))["status"] == "pass"
    done = await scrape(api)
    assert done[("scenariokit_workers", (("state", "busy"),))] == 0
    assert runs(done, "pass", "none") == 2
