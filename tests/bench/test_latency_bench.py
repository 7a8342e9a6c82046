"""``bench/latency.py``: one run at a time through the real server, alone or under the dashboard's mix.

Nothing here measures speed; the bench itself runs by hand or with ``nox -s bench``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser


def test_under_load_the_runs_go_while_the_api_mix_is_served_and_both_are_reported(tmp_path: Path) -> None:
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "latency.py"), "--runs", "2", "--gap", "0", "--load", "2"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    [heading] = [line for line in answer.stdout.splitlines() if line.startswith("POST /api/v1/run")]
    assert ", 2 runs, " in heading and "under the API mix on 2 connections (" in heading
    assert heading.endswith(", errors 0)"), heading
    assert "→ finishedAt" in answer.stdout and "job to worker" in answer.stdout
