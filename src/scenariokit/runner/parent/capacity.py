"""How many runs one machine should execute at once, from its cores and memory (docs/deployment.md).

A run is CPU-bound on the machine that executes it: the browser starts, lays out and renders pages,
and Playwright's driver, the worker process and the scheduler's store writes share the same cores.
``bench/runs.py --workers 1,2,3,4`` measured it on 2 cores (docs/performance.md, "A run's
cost"): one worker per core gave the best ratio to the bare script; a third and fourth were no
faster, while each run's store writes (SQLite) took 2.5 and 4.5 times as long and memory grew. Memory
is the other bound: each concurrent run holds a worker, a Playwright driver and up to two browsers (the
run's, and the next run's launched ahead), about :data:`MIB_PER_RUN` shared out (PSS), and never more
than half the machine's memory goes to runs.
"""

from __future__ import annotations

import os

#: memory one concurrent run's process tree holds (PSS of worker, driver and browsers, measured)
MIB_PER_RUN = 400
#: the share of the machine's memory runs may take
MEMORY_SHARE = 0.5


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers narrow), at least 1."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def physical_memory_mib() -> int | None:
    """The machine's memory in MiB, or None when the platform does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
    except (AttributeError, ValueError, OSError):
        return None


def default_workers(cores: int | None = None, memory_mib: int | None = None) -> int:
    """The worker count a scheduler starts with unless told otherwise: one per core, as memory allows.

    ``cores`` and ``memory_mib`` default to this machine's. ``--workers`` and ``SCENARIOKIT_WORKERS``
    override it.
    """
    cores = usable_cores() if cores is None else max(1, cores)
    memory_mib = physical_memory_mib() if memory_mib is None else memory_mib
    if memory_mib is None:
        return cores
    return max(1, min(cores, int(memory_mib * MEMORY_SHARE) // MIB_PER_RUN))
