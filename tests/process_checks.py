"""Which processes a test's subprocess started, and which of them are still alive."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from scenariokit.runner.confinement.processes import process_table


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (zombies included: not yet reaped)."""
    return sorted(child for child, info in process_table().items() if info.ppid == pid)


def descendants(pid: int) -> set[int]:
    """Every live process started (directly or not) by ``pid``, Chromium included."""
    table = process_table()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, info in table.items() if info.ppid in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    table = process_table()
    return {pid for pid in pids if pid in table and not table[pid].zombie}


def describe(pids: set[int]) -> list[str]:
    """The command lines of those of ``pids`` still alive (for failure messages)."""
    lines = []
    for pid in sorted(alive(pids)):
        with contextlib.suppress(OSError):
            lines.append(
                f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
            )
    return lines


def skip_if_left_out(pool: object, part: str) -> None:
    """Skip, quoting the pool's own note, when its start left ``part`` out on this machine.

    ``part`` starts a note of ``WorkerPool.left_out`` ("the worker zygote", "the Playwright driver
    zygote"): an ordinary user's service cannot have either under bubblewrap (docs/deployment.md).
    A test of that part has nothing to check there; a pool that kept it is checked as usual.
    """
    notes = [note for note in getattr(pool, "left_out", ()) if note.startswith(part)]
    if notes:
        pytest.skip(f"left out here: {notes[0]}")
