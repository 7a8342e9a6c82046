"""The default worker count follows the machine: one per core, bounded by memory; settings override it."""

from __future__ import annotations

from scenariokit.runner.parent.capacity import MIB_PER_RUN, default_workers, physical_memory_mib, usable_cores
from scenariokit.settings import Settings


def test_one_worker_per_core_when_memory_allows() -> None:
    assert default_workers(cores=2, memory_mib=24 * 1024) == 2
    assert default_workers(cores=8, memory_mib=32 * 1024) == 8


def test_memory_bounds_the_workers_a_small_machine_gets() -> None:
    # half the memory goes to runs, MIB_PER_RUN each
    assert default_workers(cores=8, memory_mib=4 * MIB_PER_RUN) == 2
    assert default_workers(cores=4, memory_mib=MIB_PER_RUN) == 1  # never fewer than one


def test_the_machines_own_cores_and_memory_are_read() -> None:
    memory = physical_memory_mib()
    assert memory is not None and memory > 0
    assert default_workers() == default_workers(cores=usable_cores(), memory_mib=memory)


def test_the_setting_defaults_to_the_machine_and_is_overridden_by_the_variable() -> None:
    assert Settings().workers == default_workers() <= usable_cores()
    assert Settings.from_env({"SCENARIOKIT_WORKERS": "5"}).workers == 5
    assert Settings.from_env({}, workers=3).workers == 3  # --workers
