"""``bench/service.py``: the real server over REST against the bare script, in rounds, with the memory
sampled in a pass of its own that is not timed.

Nothing here measures speed; the bench itself runs by hand or with ``nox -s bench``.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import service  # noqa: E402 - bench/ is a folder of scripts, not a package


async def test_the_timed_passes_run_unsampled_and_the_memory_pass_sampled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sampling = False
    passes: list[tuple[int, bool]] = []  # (runs queued, sampled meanwhile)
    queue_and_await = service._queue_and_await
    memory_peak = service.memory_peak

    async def watched_pass(http: Any, body: dict[str, Any], runs: int) -> tuple[float, list[str]]:
        passes.append((runs, sampling))
        return await queue_and_await(http, body, runs)

    @contextlib.asynccontextmanager
    async def watched_peak(roots: Callable[[], Iterable[int]]) -> AsyncIterator[Any]:
        nonlocal sampling
        sampling = True
        try:
            async with memory_peak(roots) as peak:
                yield peak
        finally:
            sampling = False

    monkeypatch.setattr(service, "_queue_and_await", watched_pass)
    monkeypatch.setattr(service, "memory_peak", watched_peak)
    monkeypatch.setattr(sys, "argv", ["service.py", "--runs", "2", "--rounds", "2", "--memory-runs", "1"])
    await service.main()
    out = capsys.readouterr().out

    assert passes == [(2, False), (2, False), (1, True)]  # two timed rounds, then the memory pass
    for label in ("one browser at a time", "browsers at once", "its own flags", "over REST"):
        line = next(line for line in out.splitlines() if label in line)
        assert re.search(r"runs/min  \(rounds: \d+, \d+\)$", line), line
    verdict = r"\d+\.\d\dx \(target >= (1\.00|1\.50)x: (met|NOT met)\)"
    assert re.search(rf"against the script with \d+ at once: {verdict}", out)
    assert re.search(rf"against the script one at a time: {verdict}", out)
    assert re.search(r"against the plain script with \d+ at once \(Playwright's own flags\): \d+\.\d\dx", out)
    assert re.search(r"peak memory of one run's process tree: .*PSS \d+ MiB, target <= 300 MiB", out)
    assert "timeline of 4 runs" in out  # the timed runs' timelines, not the memory pass's
