"""scenariokit-fake-data: ``helpers.fake``, made-up test data for step code, reproducible from a seed.

Each run gets its own generator, seeded with the environment's ``fakeSeed`` when it has one (the same
data on every run) or else with the run id (different data each run, stable within it).
"""

from __future__ import annotations

from typing import Any

from scenariokit import hookimpl
from scenariokit.domain.job import RunJob
from scenariokit_fake_data.fake import FakeData

__all__ = ["SEED_KEY", "FakeData", "scenariokit_step_helpers"]

#: The environment ``data`` key that fixes the seed.
SEED_KEY = "fakeSeed"


@hookimpl
def scenariokit_step_helpers(job: RunJob) -> dict[str, Any]:
    """``helpers.fake`` for the run: seeded by ``data.fakeSeed``, else by the run id."""
    seed = job.env_data.get(SEED_KEY)
    return {"fake": FakeData(seed if seed is not None else job.run_id.int)}
