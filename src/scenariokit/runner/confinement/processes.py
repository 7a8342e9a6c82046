"""Stopping a worker process and every process it started, Chromium included.

A worker runs in its own process group, but Playwright starts Chromium detached (a session and process
group of its own), so killing the worker's group alone would orphan the browsers. The process table
finds them: every process in the worker's group, their descendants, and everything sharing a group
with any of those (which catches a browser whose parent died before it did).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple


class ProcessInfo(NamedTuple):
    """One row of the process table."""

    ppid: int
    pgid: int
    zombie: bool


#: ``prctl`` option that makes orphaned descendants children of the caller instead of init (Linux)
PR_SET_CHILD_SUBREAPER = 36


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (in this PID namespace), whoever it belongs to."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def namespace_inode(name: str, pid: int | str = "self") -> int:
    """The inode number of process ``pid``'s namespace ``name`` (``user``, ``pid``, ``mnt``, ...): two
    processes are in the same namespace when these are equal."""
    return os.stat(f"/proc/{pid}/ns/{name}").st_ino


def become_subreaper() -> bool:
    """Make this process the parent of every orphaned descendant (Linux); False where that is not possible.

    A worker does this so that a process its step code detaches (a new session, its parent exited)
    is still its child, and so in the tree :func:`kill_process_tree` stops.
    """
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


#: where the kernel shows its processes, where it does (tests point it elsewhere)
PROC = Path("/proc")


def proc_problem() -> str | None:
    """Why this process cannot read the machine's processes and its own namespaces from :data:`PROC`
    (a non-Linux host, a container without it), or None when it can: found by reading them."""
    try:
        (PROC / "self" / "stat").read_bytes()
        (PROC / "self" / "ns" / "pid").stat()
    except OSError as exc:
        return f"{PROC} cannot be read here ({exc.strerror or exc})"
    return None


def process_table() -> dict[int, ProcessInfo]:
    """Every process on the machine by pid (from ``/proc`` where it can be read, else ``ps``)."""
    if proc_problem() is None:
        return _proc_table()
    output = subprocess.run(
        ["ps", "-A", "-o", "pid=,ppid=,pgid=,stat="], capture_output=True, text=True, check=True
    ).stdout
    table = {}
    for line in output.splitlines():
        pid, ppid, pgid, stat = line.split(None, 3)
        table[int(pid)] = ProcessInfo(int(ppid), int(pgid), stat.startswith("Z"))
    return table


def _proc_table() -> dict[int, ProcessInfo]:
    # Read with os calls, not pathlib: a worker's stop without a sandbox reads the table twice, and a
    # Path and a text file per process cost three times as much (about 55 µs a process on 2 cores).
    table = {}
    folder = str(PROC)
    for name in os.listdir(folder):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"{folder}/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:  # the process ended while we looked
            continue
        # the command name may hold spaces and parentheses: the fields we need follow the last ")"
        state, ppid, pgid = stat[stat.rindex(b")") + 2 :].split(None, 3)[:3]
        table[int(name)] = ProcessInfo(int(ppid), int(pgid), state == b"Z")
    return table


def process_tree(pgid: int, table: dict[int, ProcessInfo] | None = None) -> set[int]:
    """The live processes a worker (whose process group is ``pgid``) started, the worker included."""
    table = process_table() if table is None else table
    own_group = os.getpgrp()
    groups = {pgid}
    tree: set[int] = set()
    while True:
        grown = {
            pid
            for pid, info in table.items()
            if not info.zombie and (info.pgid in groups or info.ppid in tree or pid == pgid)
        }
        if grown <= tree:
            return tree
        tree |= grown
        groups |= {table[pid].pgid for pid in grown} - {own_group, 0, 1}


def kill_process_tree(pgid: int) -> set[int]:
    """SIGKILL a worker and everything it started; returns the pids signalled.

    The worker's own group is stopped first so nothing new is started while the table is read. The
    caller's own process group is never signalled as a group.
    """
    own_group = os.getpgrp()
    if pgid != own_group:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGSTOP)
    signalled: set[int] = set()
    for _ in range(3):  # a second look catches what was forked while the first kill went out
        table = process_table()
        tree = process_tree(pgid, table) - signalled
        if not tree:
            break
        _kill(tree, {table[pid].pgid for pid in tree if pid in table} - {own_group, 0, 1})
        signalled |= tree
    return signalled


def _kill(pids: Iterable[int], groups: Iterable[int]) -> None:
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def wait_readable(fd: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds until ``fd`` has something to read, or its end; False when not.

    ``poll``, not ``select``: a service whose open-file limit is raised (a container's often is) opens
    descriptors numbered past 1024, which ``select`` refuses with ``ValueError``.
    """
    watch = select.poll()
    watch.register(fd, select.POLLIN)
    return bool(watch.poll(max(timeout, 0) * 1000))


#: how long :func:`kill_and_wait` lets processes it could not hold by a pidfd die before it returns
UNHELD_PAUSE_SECONDS = 0.005


def kill_and_wait(pids: Iterable[int], timeout: float) -> set[int]:
    """SIGKILL ``pids`` and wait until they have exited; the pids still running after ``timeout`` s.

    Each is held by a pidfd (Linux 5.3), which becomes readable when its process exits, whoever its
    parent is: one wait for all of them, where reading who is left every few milliseconds costs the
    CPU the next run starts on. A process already gone counts as exited. Where pidfds are missing,
    the kill goes out by pid, a moment passes (:data:`UNHELD_PAUSE_SECONDS`) and those pids count as
    still running: the caller's next look finds who is left.
    """
    held: dict[int, int] = {}
    unheld: set[int] = set()
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue  # exited already
            except (OSError, AttributeError):  # no pidfds here
                unheld.add(pid)
                continue
            held[fd] = pid
            with contextlib.suppress(OSError):  # by its pidfd: never a process that took its pid since
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        _kill(unheld, ())
        waiting = set(held)
        watch = select.poll()  # no limit on the descriptors' numbers, unlike select()
        for fd in waiting:
            watch.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while waiting:
            ready = {fd for fd, _ in watch.poll(max(deadline - time.monotonic(), 0) * 1000)}
            if not ready:
                break
            for fd in ready:
                watch.unregister(fd)
            waiting -= ready
        if unheld:
            time.sleep(min(UNHELD_PAUSE_SECONDS, timeout))
        return {held[fd] for fd in waiting} | unheld
    finally:
        for fd in held:
            os.close(fd)


def wait_for_exit(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for a child to exit, and reap it; False when it is still running.

    One wait on its pidfd, where :meth:`subprocess.Popen.wait` with a timeout polls ``waitpid`` in a
    loop of sleeps (Python before 3.14).
    """
    if process.returncode is not None:
        return True
    try:
        fd = os.pidfd_open(process.pid)
    except ProcessLookupError:  # reaped by another thread's wait(): this one returns at once
        process.wait()
        return True
    except (OSError, AttributeError):
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        exited = wait_readable(fd, timeout)
    finally:
        os.close(fd)
    if exited:
        process.wait()
    return exited
