"""Latency of one run through the real service: ``POST /api/v1/run`` → ``finishedAt``.

``scenariokit serve`` with its defaults on a free port and a temporary SQLite file runs a one-step
scenario (``log('x')``) ``--runs`` times, one at a time, with ``--gap`` seconds of idle between runs (a
person or a CI job starting a run, not a queue: the queue is bench/service.py's). Two figures per run:
``finishedAt`` (the server's stamp of the outcome) minus the moment the POST was sent, and the moment a
client polling ``GET /api/v1/run/{id}`` every 10 ms first sees it finished. Median and p95 are printed
against the targets (120 ms and 250 ms), and the mean run timeline shows where the time went.

With ``--load N`` the runs go while ``N`` connections send ``bench/api.py``'s dashboard mix as fast as
the server answers (200 scenarios seeded first): a run's latency where the server's event loop is busy
with requests and a core is still free for the run, with the API's requests/s and p99 meanwhile. The
targets are those of a run alone; the figures under load say what a busy dashboard adds to them.

    python bench/latency.py [--runs 40] [--gap 0.5] [--load 16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from _shared import create, scenariokit_serve, timeline_lines, timings_of

from api import load, seed
from scenariokit.formats.convert import parse_time
from scenariokit.settings import Settings

API = "/api/v1"
TARGET_MEDIAN_MS = 120.0
TARGET_P95_MS = 250.0
WARM_UP_RUNS = 3


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


async def one_run(http: aiohttp.ClientSession, body: dict[str, Any]) -> tuple[float, float, dict[str, Any]]:
    """(ms to ``finishedAt``, ms until a poller saw it finished, the run detail) of one run."""
    sent = datetime.now(UTC)
    began = time.perf_counter()
    run = await create(http, f"{API}/run", body)
    while True:
        async with http.get(f"{API}/run/{run['id']}", params={"limit": "1"}) as answer:
            detail: dict[str, Any] = await answer.json()
        if detail["finishedAt"]:
            seen = (time.perf_counter() - began) * 1000
            break
        await asyncio.sleep(0.01)
    if detail["status"] != "pass":
        raise SystemExit(f"the run did not pass: {detail['error']}")
    return (parse_time(detail["finishedAt"]) - sent).total_seconds() * 1000, seen, detail


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--gap", type=float, default=0.5, help="idle seconds between runs")
    parser.add_argument("--load", type=int, default=0, help="connections sending the API mix meanwhile")
    args = parser.parse_args()
    traffic = ""
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit_serve(Path(tmp)) as served, aiohttp.ClientSession(served.url) as http:
            env = await create(http, f"{API}/environments", {"name": "bench", "data": {}})
            steps = [{"execCode": "log('x')"}]
            scenario = await create(http, f"{API}/scenarios", {"name": "one step", "steps": steps})
            body = {"scenarioId": scenario["id"], "environmentId": env["id"]}
            stop = asyncio.Event()
            mix = None
            if args.load:
                await seed(served.url, 200)
                mix = asyncio.create_task(load(served.url, "API mix", 0, stop=stop, connections=args.load))
            samples = []
            for index in range(WARM_UP_RUNS + args.runs):
                sample = await one_run(http, body)
                if index >= WARM_UP_RUNS:
                    samples.append(sample)
                await asyncio.sleep(args.gap)
            if mix is not None:
                stop.set()
                api = await mix
                traffic = (
                    f", under the API mix on {args.load} connections ({api.rps:.0f} req/s, "
                    f"p99 {api.quantile(0.99):.1f} ms, errors {api.errors})"
                )
    finished = [s[0] for s in samples]
    seen = [s[1] for s in samples]
    workers = Settings().workers
    print(f"POST /api/v1/run → finished, one-step scenario, {args.runs} runs, {workers} workers{traffic}")
    for label, values in (("→ finishedAt", finished), ("→ seen finished (10 ms polls)", seen)):
        median, high = statistics.median(values), p95(values)
        verdict = "met" if median <= TARGET_MEDIAN_MS and high <= TARGET_P95_MS else "not met"
        print(
            f"  {label:30s} median {median:6.1f} ms ({median / TARGET_MEDIAN_MS:.2f}x target)   "
            f"p95 {high:6.1f} ms ({high / TARGET_P95_MS:.2f}x target)   {verdict}"
        )
    for line in timeline_lines(timings_of(s[2] for s in samples)):
        print(f"  {line}")


if __name__ == "__main__":
    asyncio.run(main())
