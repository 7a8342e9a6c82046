"""Stopping a worker's launcher: nothing of its process group outlives it, and nothing waits on a reader.

A bubblewrap launcher killed in the instant before its inner process set ``--die-with-parent`` left
that process (and the worker under it) running with no parent; it held the worker's output pipe open,
and closing the stream a reader thread was blocked on then stopped the event loop for good (seen once
in CI as a suite that never finished).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from process_checks import alive
from scenariokit.runner.parent.worker_handle import _close_pipes, _end_sandbox

#: a launcher whose child stays in its process group and would outlive it (no parent-death signal)
LAUNCHER = (
    "import subprocess, time; subprocess.Popen(['sleep', '300']); print('up', flush=True); time.sleep(300)"
)


def _launch() -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, stdin=subprocess.PIPE, process_group=0
    )
    assert process.stdout is not None and process.stdout.readline() == b"up\n"
    return process


def _group_members(pgid: int) -> set[int]:
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.add(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ending_a_launcher_kills_everything_left_in_its_process_group() -> None:
    process = _launch()
    members = _group_members(process.pid)
    assert len(members) == 2, members  # the launcher and its child
    assert _end_sandbox(process)
    deadline = time.monotonic() + 5
    while alive(members) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(members), "a process of the launcher's group outlived it"


def test_closing_a_worker_s_pipes_never_waits_for_a_reader_thread() -> None:
    process = _launch()
    assert process.stdout is not None
    reading = threading.Thread(target=process.stdout.read, daemon=True)  # blocks: the child keeps it open
    reading.start()
    time.sleep(0.2)
    try:
        done = threading.Event()

        def close() -> None:
            _close_pipes(process, skip={id(process.stdout)})
            done.set()

        threading.Thread(target=close, daemon=True).start()
        assert done.wait(5), "closing the pipes waited for the thread reading one of them"
    finally:
        _end_sandbox(process)
        reading.join(5)
    assert not reading.is_alive()  # the pipe ended with the group, and the read with it
