"""What a step's printed lines cost: a loud step through the library, against a script's own stdout.

A step's ``print`` and ``log()`` lines go to the run's log: the worker masks each line and sends it to
the scheduler as a frame, the scheduler reads it, masks it again as part of a stream, and writes the
lines it gathered every quarter second in one transaction, so that a run's log can be read (and
searched) while the run goes on. This benchmark runs a one-step scenario that prints ``--lines`` lines
(``print('line', i)``) and the same scenario printing nothing, alternately, through the library's
scheduler (one worker, the default sandbox, the store at ``--database-url``, a temporary SQLite file
by default), and prints what the lines added: the run's wall time and the scheduler process's CPU,
per line. Every line is checked to be in the log.

The baseline is what a script's output costs a home-grown runner that keeps it: a Python process
printing the same lines to a pipe, read line by line by its parent, which keeps them in a list (the
child's and the parent's CPU). No target: a log line kept, searchable and masked is more work than a
line in a pipe; the ratio says how much.

    python bench/output.py [--lines 30000] [--rounds 3] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import scenariokit
from scenariokit.domain.model import RunStatus

KEY = "bench-output-secret-key"


def pipe_baseline(lines: int) -> float:
    """CPU seconds of a child printing ``lines`` lines to a pipe and of this process reading them."""
    code = f"for i in range({lines}):\n    print('line', i)"
    before, began = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    kept: list[str] = []
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            kept.append(line.rstrip("\n"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert len(kept) == lines, f"the pipe gave {len(kept)} of {lines} lines"
    child_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return child_cpu + (time.process_time() - began)


async def measure(database_url: str, lines: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(wall seconds, scheduler CPU seconds) of each run, quiet and loud, alternated, by kind."""
    found: dict[str, list[tuple[float, float]]] = {"quiet": [], "loud": []}
    with tempfile.TemporaryDirectory() as folder:
        async with scenariokit.open_kit(
            database_url, secret_key=KEY, workers=1, artifacts_dir=Path(folder) / "artifacts"
        ) as kit:
            env = await kit.environments.create({"name": "bench"})
            quiet = await kit.scenarios.create({"name": "quiet", "steps": [{"execCode": "x = 1"}]})
            code = f"for i in range({lines}):\n    print('line', i)"
            loud = await kit.scenarios.create({"name": "loud", "steps": [{"execCode": code}]})
            await kit.run(quiet.id, environment_id=env.id, timeout=120)  # the pool warm
            for _ in range(rounds):
                for kind, scenario in (("quiet", quiet), ("loud", loud)):
                    cpu, began = time.process_time(), time.perf_counter()
                    result = await kit.run(scenario.id, environment_id=env.id, timeout=300)
                    found[kind].append((time.perf_counter() - began, time.process_time() - cpu))
                    assert result.run.status is RunStatus.PASS, result.run.error
                    if kind == "loud":
                        kept = await kit.logs(result.run.id, "line ", limit=1)
                        assert kept.logs.total == lines, f"{kept.logs.total} of {lines} lines in the log"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.database_url or f"sqlite:///{folder}/bench.db"
        found = asyncio.run(measure(url, args.lines, args.rounds))
    baseline = statistics.median(pipe_baseline(args.lines) for _ in range(args.rounds))
    per_line = 1e6 / args.lines
    pairs = list(zip(found["quiet"], found["loud"], strict=True))
    wall, cpu = (statistics.median(loud[at] - quiet[at] for quiet, loud in pairs) for at in (0, 1))
    store = "SQLite" if url.startswith("sqlite") else url.split(":", 1)[0]
    print(
        f"a step printing {args.lines:,} lines against one printing none, {store}, one worker,"
        f" median of {args.rounds}"
    )
    print(f"  the run's wall time            {wall * per_line:7.1f} µs a line more")
    print(f"  the scheduler process's CPU    {cpu * per_line:7.1f} µs a line more")
    print(f"  baseline: a pipe read by its parent, both processes' CPU {baseline * per_line:7.1f} µs a line")
    print(f"  the scheduler's CPU a line against the pipe's: {cpu / baseline:.1f}x (no target)")


if __name__ == "__main__":
    main()
