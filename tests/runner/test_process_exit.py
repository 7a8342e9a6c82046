"""Killing processes and waiting for their exit by pidfd, never by polling (confinement.processes), and
waiting on descriptors of any number (``poll``, not ``select``)."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scenariokit.runner.confinement.processes import kill_and_wait, wait_for_exit, wait_readable
from scenariokit.runner.confinement.zygote import ForkedWorker

SLEEP = [sys.executable, "-I", "-c", "import time; time.sleep(60)"]


def exited(pid: int) -> bool:
    """Gone, or a zombie: it ran its last instruction."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in {"Z", "X"}


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_kill_and_wait_returns_once_every_process_has_exited(sleepers: list[subprocess.Popen[bytes]]) -> None:
    sleepers.extend(subprocess.Popen(SLEEP) for _ in range(3))

    assert kill_and_wait([p.pid for p in sleepers], 10) == set()

    assert all(exited(p.pid) for p in sleepers)  # no wait after: they are zombies already
    assert [p.wait(timeout=0.5) for p in sleepers] == [-9, -9, -9]


def test_kill_and_wait_reaches_processes_that_are_not_its_children(tmp_path: Path) -> None:
    # the shell starts a sleeper in the background and exits: the sleeper is another process's child
    pid_file = tmp_path / "pid"
    script = f"{sys.executable} -I -c 'import time; time.sleep(60)' & echo $! > {pid_file}"
    subprocess.run(["/bin/sh", "-c", script], check=True, timeout=30)
    orphan = int(pid_file.read_text())
    assert not exited(orphan)

    assert kill_and_wait([orphan], 10) == set()

    assert exited(orphan)


def test_kill_and_wait_skips_a_pid_that_is_gone(sleepers: list[subprocess.Popen[bytes]]) -> None:
    done = subprocess.Popen([sys.executable, "-I", "-c", "pass"])
    done.wait(timeout=30)  # reaped: its pid names nobody now
    sleepers.append(subprocess.Popen(SLEEP))

    assert kill_and_wait([done.pid, sleepers[0].pid], 10) == set()
    assert sleepers[0].wait(timeout=0.5) == -9


def test_wait_for_exit_waits_up_to_its_timeout_then_reaps(sleepers: list[subprocess.Popen[bytes]]) -> None:
    sleepers.append(process := subprocess.Popen(SLEEP))

    assert not wait_for_exit(process, 0.2)
    assert process.returncode is None

    os.kill(process.pid, 9)
    assert wait_for_exit(process, 10)
    assert process.returncode == -9
    assert wait_for_exit(process, 0)  # reaped already: nothing to wait for


def test_without_pidfds_the_kill_goes_out_by_pid_and_the_pids_count_as_running(
    sleepers: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sleepers.extend(subprocess.Popen(SLEEP) for _ in range(2))

    def refused(pid: int) -> int:
        raise OSError(errno.ENOSYS, "pidfd_open refused")

    monkeypatch.setattr(os, "pidfd_open", refused)

    assert kill_and_wait([p.pid for p in sleepers], 10) == {p.pid for p in sleepers}  # not known to be gone
    assert [p.wait(timeout=10) for p in sleepers] == [-9, -9]


def test_without_pidfds_wait_for_exit_waits_as_popen_does(
    sleepers: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    sleepers.append(process := subprocess.Popen(SLEEP))

    assert not wait_for_exit(process, 0.1)
    process.kill()
    assert wait_for_exit(process, 10)
    assert process.returncode == -9


@pytest.fixture
def high_pipe() -> Iterator[tuple[int, int]]:
    """A pipe whose read end is numbered past 1024, as in a service whose open-file limit is raised."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1600
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the open-file limit's hard value ({hard}) keeps descriptors under {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    read, write = os.pipe()
    high = os.dup2(read, 1500)
    os.close(read)
    try:
        yield high, write
    finally:
        for fd in (high, write):
            with contextlib.suppress(OSError):
                os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_wait_readable_serves_descriptors_past_1024(high_pipe: tuple[int, int]) -> None:
    read, write = high_pipe

    assert not wait_readable(read, 0.05)
    os.write(write, b"x")
    assert wait_readable(read, 5)


def test_a_forked_workers_exit_is_read_from_a_status_pipe_past_1024(high_pipe: tuple[int, int]) -> None:
    read, write = high_pipe
    worker = ForkedWorker(pid=os.getpid(), status=read)

    assert worker.wait(0.05) is None
    os.write(write, b"exit 3\n")
    assert worker.wait(5) == 3
    worker.close()
