"""``bench/soak.py``: where a run's time went, alone and under load, from the runs' stored timings.

Nothing here measures speed; the bench itself runs by hand or with ``nox -s bench``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import soak  # noqa: E402 - bench/ is a folder of scripts, not a package

TIMINGS = {
    "one": {"claimMs": 4, "jobToWorkerMs": 100, "browserReadyMs": 2, "contextAndPageMs": 0, "stepsMs": 250},
    "two": {"claimMs": 6, "jobToWorkerMs": 140, "browserReadyMs": 0, "contextAndPageMs": 0, "stepsMs": 270},
}


async def test_a_slots_time_outside_the_runs_phases_is_what_their_means_leave_of_it() -> None:
    async def detail(request: web.Request) -> web.Response:  # the run detail's shape (docs/rest.md)
        return web.json_response({"status": "pass", "timings": TIMINGS[request.match_info["id"]]})

    app = web.Application()
    app.router.add_get("/api/v1/run/{id}", detail)
    async with TestServer(app, host="127.0.0.1") as server, ClientSession(str(server.make_url(""))) as http:
        # two runs in 0.5 s on two workers: a slot's time is 500 ms a run
        split = await soak.time_split(http, ["one", "two"], 0.5, 2)

    assert split == {
        "claimMs": 5.0,
        "jobToWorkerMs": 120.0,
        "browserReadyMs": 1.0,
        "contextAndPageMs": 0.0,
        "stepsMs": 260.0,
        "afterStepsMs": 0.0,  # left out of a run's timings: none
        "outside": 500.0 - 386.0,
    }
    line = soak.describe_split(split, {**split, "outside": 20.0})
    assert line.startswith("claim 5 → 5, to a worker 120 → 120, browser 1 → 1")
    assert line.endswith("report 0 → 0, outside them 114 → 20")
