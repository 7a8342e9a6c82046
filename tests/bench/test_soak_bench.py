"""``bench/soak.py``: where a run's time went, alone and under load, from the runs' stored timings.

Nothing here measures speed; the bench itself runs by hand or with ``nox -s bench``.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import soak  # noqa: E402 - bench/ is a folder of scripts, not a package
from _shared import timings_of  # noqa: E402

#: two runs' details as ``GET /api/v1/run/{id}`` answers them (docs/rest.md, "Run timings")
DETAILS = [
    {"status": "pass", "timings": {"claimMs": 4, "jobToWorkerMs": 100, "browserReadyMs": 2, "stepsMs": 250}},
    {"status": "pass", "timings": {"claimMs": 6, "jobToWorkerMs": 140, "browserReadyMs": 0, "stepsMs": 270}},
]


def test_a_slots_time_outside_the_runs_phases_is_what_their_means_leave_of_it() -> None:
    # two runs in 0.5 s on two workers: a slot's time is 500 ms a run
    split = soak.time_split(timings_of(DETAILS), 0.5, 2)

    assert split == {
        "claim": 5.0,
        "job to worker": 120.0,
        "browser ready": 1.0,
        "context and page": 0.0,  # left out of a run's timings: none
        "steps": 260.0,
        "after steps": 0.0,
        "outside them": 500.0 - 386.0,
    }
    line = soak.describe_split(split, {**split, "outside them": 20.0})
    assert line.startswith("claim 5 → 5, job to worker 120 → 120, browser ready 1 → 1")
    assert line.endswith("after steps 0 → 0, outside them 114 → 20")
