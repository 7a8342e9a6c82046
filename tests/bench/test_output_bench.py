"""bench/output.py measures for real: a loud step's lines all reach the log, and what each cost is printed
beside a pipe's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_loud_steps_lines_are_timed_against_a_pipe(tmp_path: Path) -> None:
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "output.py"), "--lines", "2000", "--rounds", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    out = answer.stdout
    assert out.startswith("a step printing 2,000 lines against one printing none, SQLite, one worker"), out
    assert re.search(r"the run's wall time +-?[\d.]+ µs a line more", out), out
    assert re.search(r"the scheduler process's CPU +-?[\d.]+ µs a line more", out), out
    assert re.search(r"baseline: a pipe read by its parent, both processes' CPU +[\d.]+ µs a line", out), out
    assert re.search(r"against the pipe's: -?[\d.]+x \(no target\)", out), out
