"""What a video costs per run: the same three-step scenario with ``browser.video: on`` and without.

Both scenarios run through scenariokit (store, scheduler, one-run workers, the headless shell
discovery finds) against the same page on 127.0.0.1, alternating, one worker, so each pair meets the
same machine. Printed: the median wall time of a run (queued to finished) each way, their ratio,
and the size of a video. docs/browser.md quotes the figures.

    python bench/video.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from _shared import STEPS, serve_page

import scenariokit
from scenariokit.domain.model import RunStatus


async def measure(runs: int) -> None:
    runner, url = await serve_page()
    try:
        with tempfile.TemporaryDirectory() as folder:
            async with scenariokit.open_kit(
                f"sqlite:///{folder}/bench.db", workers=1, artifacts_dir=Path(folder) / "artifacts"
            ) as kit:
                env = await kit.environments.create({"name": "bench", "data": {"url": url}})
                steps = [{"execCode": code} for code in STEPS]
                plain = await kit.scenarios.create({"name": "plain", "steps": steps})
                video = await kit.scenarios.create(
                    {"name": "video", "steps": steps, "browser": {"video": "on"}}
                )
                await kit.run(plain.id, environment_id=env.id, timeout=120)  # warm: imports, first launch
                walls: dict[str, list[float]] = {"plain": [], "video": []}
                sizes: list[int] = []
                for _ in range(runs):
                    for name, scenario in (("plain", plain), ("video", video)):
                        started = time.perf_counter()
                        result = await kit.run(scenario.id, environment_id=env.id, timeout=120)
                        walls[name].append(time.perf_counter() - started)
                        assert result.run.status is RunStatus.PASS, result.run.error
                        if name == "video":
                            assert "video.webm" in result.run.artifacts, [
                                m.message for m in result.logs.items
                            ]
                            sizes.append(
                                (kit.services.runs.artifacts_dir(result.run.id) / "video.webm").stat().st_size
                            )
    finally:
        await runner.cleanup()
    wall = {name: statistics.median(values) for name, values in walls.items()}
    print(f"runs each: {runs} (alternating, one worker)")
    print(f"wall per run: without video {wall['plain']:.2f} s, with video {wall['video']:.2f} s")
    print(f"ratio (video / without): {wall['video'] / wall['plain']:.2f}")
    print(f"video size: median {statistics.median(sizes) / 1024:.0f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each scenario (default 10)")
    asyncio.run(measure(parser.parse_args().runs))


if __name__ == "__main__":
    main()
