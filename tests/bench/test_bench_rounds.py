"""The run benchmarks judge their targets on three rounds unless told otherwise.

One round's ratio to the bare script moved from 0.97x to 1.07x within minutes on one machine
(docs/performance.md, wave 3, session 28), so what ``nox -s bench`` prints as a verdict is the median
of three rounds, as ``bench/service.py`` already measured. Nothing here measures anything.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import cpu  # noqa: E402 - bench/ is a folder of scripts, not a package
import runs  # noqa: E402


@pytest.mark.parametrize("script", [cpu, runs], ids=["cpu.py", "runs.py"])
def test_without_options_three_rounds_are_measured(script: ModuleType) -> None:
    assert script.arguments().parse_args([]).rounds == 3


@pytest.mark.parametrize("script", [cpu, runs], ids=["cpu.py", "runs.py"])
def test_a_round_count_given_is_kept(script: ModuleType) -> None:
    assert script.arguments().parse_args(["--rounds", "1"]).rounds == 1
