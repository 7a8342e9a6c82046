"""Throughput across worker processes: the server plus 1, 2 and 3 ``scenariokit worker`` on one PostgreSQL.

Each line starts ``scenariokit serve`` without its own scheduler (``SCENARIOKIT_RUN_SCHEDULER=false``)
on a fresh PostgreSQL schema, then N ``scenariokit worker`` processes, each with its own pool of
browsers (``--workers``, default 1 each, so the line shows what adding a process adds), queues
``--runs`` runs of a three-step scenario over REST and awaits them. The bare Playwright script is
measured first, in the same run, as the baseline. Each line prints runs/min in all and per process,
the claim latency (median and 95th percentile of the time a run waited to be claimed and of the claim
itself, from the runs' timings), and how close each count comes to linear against the first.

On one machine the processes share its cores: the line flattens once the cores are busy, which is the
point of measuring it — on separate machines each worker brings its own.

    python bench/scale.py [--runs 30] [--counts 1,2,3] [--workers 1] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import attrs
from _shared import (
    STEPS,
    bare_playwright,
    create,
    per_minute,
    runs_per_minute,
    scenariokit_serve,
    serve_page,
    timings_of,
    until_quiet,
)

from api import BENCH_KEY, DEFAULT_POSTGRES, postgres_schema
from scenariokit.domain.model import RunTimings

API = "/api/v1"


@contextlib.asynccontextmanager
async def workers(count: int, per_process: int, env: dict[str, str]) -> AsyncIterator[None]:
    """``count`` ``scenariokit worker`` processes, stopped (SIGTERM) afterwards."""
    command = str(Path(sys.executable).parent / "scenariokit")
    processes = [
        await asyncio.create_subprocess_exec(
            command,
            "worker",
            "--workers",
            str(per_process),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        # each pool prepares its drivers' snapshot and zygote and launches its first browsers: seconds of
        # both cores, which would otherwise fall in the measurement (the more processes, the more)
        await until_quiet(process.pid for process in processes)
        yield
    finally:
        for process in processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


@attrs.frozen
class Line:
    """One point of the scale line: how many worker processes, their runs/min, and the claims' latency."""

    processes: int
    rate: float
    timings: list[RunTimings | None]

    def claim_latency(self) -> str:
        """Median and 95th percentile of queued (created → a scheduler started its claim) and of the claim
        itself (the lease taken and the run's inputs read), in ms."""
        parts = []
        for label, name in (("queued", "queued_ms"), ("claim", "claim_ms")):
            values = sorted(v for t in self.timings if t is not None and (v := getattr(t, name)) is not None)
            if values:
                p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
                parts.append(f"{label} median {statistics.median(values):.0f} ms, p95 {p95} ms")
        return "; ".join(parts) or "no timings"


async def measure(url: str, page_url: str, runs: int, processes: int) -> Line:
    """Runs per minute from the first ``POST /run`` until none is in progress (every run must pass)."""
    async with aiohttp.ClientSession(url) as http:
        env = await create(http, f"{API}/environments", {"name": "scale", "data": {"url": page_url}})
        steps = [{"execCode": code} for code in STEPS]
        scenario = await create(http, f"{API}/scenarios", {"name": "scale", "steps": steps})
        body = {"scenarioId": scenario["id"], "environmentId": env["id"]}
        rate = await runs_per_minute(http, body, runs)
        details = []
        async with http.get(f"{API}/run", params={"limit": str(runs)}) as answer:
            for item in (await answer.json())["items"]:
                async with http.get(f"{API}/run/{item['id']}", params={"limit": "1"}) as detail:
                    details.append(await detail.json())
    return Line(processes, rate, timings_of(details))


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--counts", default="1,2,3", help="worker process counts, comma-separated")
    parser.add_argument("--workers", type=int, default=1, help="browsers at once per worker process")
    parser.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES_URL", DEFAULT_POSTGRES))
    args = parser.parse_args()
    counts = [int(part) for part in args.counts.split(",")]
    runner, page_url = await serve_page()
    lines = []
    try:
        await bare_playwright(page_url, 2)
        bare = per_minute(args.runs, await bare_playwright(page_url, args.runs))
        for count in counts:
            async with postgres_schema(args.postgres) as database_url:
                if database_url is None:
                    return
                env = {"SCENARIOKIT_DATABASE_URL": database_url, "SCENARIOKIT_SECRET_KEY": BENCH_KEY}
                worker_env = {k: v for k, v in os.environ.items() if not k.startswith("SCENARIOKIT_")}
                worker_env.update(env)
                api_only = {**env, "SCENARIOKIT_RUN_SCHEDULER": "false"}
                with tempfile.TemporaryDirectory() as tmp:
                    async with (
                        scenariokit_serve(Path(tmp), settle=0.5, env_extra=api_only) as served,
                        workers(count, args.workers, worker_env),
                    ):
                        lines.append(await measure(served.url, page_url, args.runs, count))
    finally:
        await runner.cleanup()
    print(f"{args.runs} runs of a three-step scenario, {os.cpu_count()} cores,", end=" ")
    print(f"{args.workers} browser(s) per worker process")
    print(f"  {'bare Playwright script (fresh headless shell each)':52s} {bare:7.1f} runs/min   1.00x")
    for line in lines:
        label = f"server + {line.processes} scenariokit worker process(es), PostgreSQL"
        print(f"  {label:52s} {line.rate:7.1f} runs/min   {line.rate / bare:.2f}x", end="   ")
        print(f"{line.rate / line.processes:6.1f} runs/min per process")
        print(f"    claims: {line.claim_latency()}")
    if len(lines) > 1:
        first = lines[0]
        for line in lines[1:]:
            gained = (line.rate / first.rate) / (line.processes / first.processes)
            print(f"  {line.processes} processes against {first.processes}: {gained:.2f} of linear")


if __name__ == "__main__":
    asyncio.run(main())
