"""The process table a worker's stop reads without a sandbox (``runner/confinement/processes.py``).

A worker without a sandbox is stopped by reading every process's parent and group from ``/proc`` and
killing its tree; the table must hold what ``ps`` says, whatever a process calls itself.
"""

from __future__ import annotations

import subprocess
import sys
import time

from process_checks import alive
from scenariokit.runner.confinement.processes import kill_process_tree, process_table, process_tree

#: a process that names itself like the end of a /proc/PID/stat's name field, then starts a child in
#: its own process group and one in a group of its own (as Playwright starts a browser)
NAMED = r"""
import ctypes, subprocess, sys, time
ctypes.CDLL(None).prctl(15, b"a) R 1 1 (b", 0, 0, 0)  # PR_SET_NAME
subprocess.Popen(["sleep", "300"])
subprocess.Popen(["sleep", "300"], start_new_session=True)
print("up", flush=True)
time.sleep(300)
"""


def test_the_table_holds_each_process_s_parent_and_group_whatever_its_name() -> None:
    named = subprocess.Popen([sys.executable, "-c", NAMED], stdout=subprocess.PIPE, process_group=0)
    try:
        assert named.stdout is not None and named.stdout.readline() == b"up\n"
        table = process_table()
        listed = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid=,pgid="], capture_output=True, text=True, check=True
        ).stdout
        by_ps = {int(pid): (int(ppid), int(pgid)) for pid, ppid, pgid in map(str.split, listed.splitlines())}
        assert table[named.pid].pgid == named.pid  # its own group, as a worker's
        for pid in (named.pid, *(p for p, info in table.items() if info.ppid == named.pid)):
            assert (table[pid].ppid, table[pid].pgid) == by_ps[pid]
            assert not table[pid].zombie
        tree = process_tree(named.pid, table)
        assert len(tree) == 3  # itself, the child in its group and the one that left it
    finally:
        signalled = kill_process_tree(named.pid)
        named.wait()
    assert len(signalled) == 3
    others = signalled - {named.pid}
    deadline = time.monotonic() + 5
    while alive(others) and time.monotonic() < deadline:  # a SIGKILL is sent, not yet acted on
        time.sleep(0.01)
    assert not alive(others)
