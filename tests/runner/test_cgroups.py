"""Run memory groups on the real control-group file system (skipped where this process may make none)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scenariokit.runner.confinement.cgroups import JOIN_FAILED, RunGroup, RunGroups, open_run_groups


@pytest.fixture
def groups() -> Iterator[RunGroups]:
    found = open_run_groups(256, 20, tag=f"test{id(object())}")
    if found is None:
        pytest.skip("this machine lets this process make no memory control group (not root, no cgroup fs)")
    try:
        yield found
    finally:
        found.close()


def _child(code: str, group: RunGroup) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(group.born_in([sys.executable, "-I", "-c", code]), capture_output=True, timeout=60)


def test_a_process_tree_over_the_limit_is_killed_and_counted(groups: RunGroups) -> None:
    group = groups.create()
    # the grandchild allocates: a limit on the group binds every process born in it
    done = _child(
        "import subprocess,sys;sys.exit(subprocess.run([sys.executable,'-c',"
        "'b=bytearray(600*1024*1024);print(1)']).returncode)",
        group,
    )
    assert done.returncode != 0 and b"1" not in done.stdout
    assert group.oom_kills() >= 1
    peak = group.peak_bytes()
    assert peak is not None and peak <= groups.limits.memory_bytes + 4096
    group.remove()
    assert not any(place.path.exists() for place in group.places)


def test_a_run_under_the_limit_is_untouched_and_its_peak_is_read(groups: RunGroups) -> None:
    group = groups.create()
    done = _child("b=bytearray(16*1024*1024);b[::4096]=b'x'*len(b[::4096]);print('ok')", group)
    assert done.returncode == 0 and done.stdout.strip() == b"ok"
    assert group.oom_kills() == 0
    peak = group.peak_bytes()
    assert peak is not None and 16 * 1024 * 1024 <= peak <= groups.limits.memory_bytes
    group.remove()


def test_forks_past_the_task_limit_fail_with_eagain(groups: RunGroups) -> None:
    if "pids" not in groups.controllers:
        pytest.skip("no pids controller here")
    group = groups.create()
    tasks = groups.limits.tasks
    done = _child(
        "import os,time\n"
        "made=0\n"
        f"for _ in range({tasks * 2}):\n"
        "    try:\n"
        "        pid=os.fork()\n"
        "    except BlockingIOError:\n"
        "        print('refused after', made); break\n"
        "    if pid == 0:\n"
        "        os.close(1); os.close(2); time.sleep(30); os._exit(0)\n"
        "    made+=1\n",
        group,
    )
    assert done.stdout.startswith(b"refused after "), done
    assert int(done.stdout.split()[-1]) < tasks
    assert group.task_limit_hits() >= 1
    group.remove()  # the sleeping children go with it
    assert not any(place.path.exists() for place in group.places)


def test_remove_kills_what_is_left_and_close_removes_everything(groups: RunGroups) -> None:
    group = groups.create()
    sleeper = subprocess.Popen(group.born_in([sys.executable, "-c", "import time;time.sleep(60)"]))
    try:
        deadline = time.monotonic() + 10
        while not group.pids() and time.monotonic() < deadline:  # the shell joins, then is the sleeper
            time.sleep(0.01)
        assert group.pids() == [sleeper.pid]
        groups.create()  # a second group left behind, as a crashed pool would
        group.remove()
        assert sleeper.wait(timeout=10) == -9
        assert not any(place.path.exists() for place in group.places)
    finally:
        sleeper.kill()
        sleeper.wait()
    groups.close()
    assert not any(place.path.exists() for place in groups.places)


def test_a_process_that_cannot_join_its_group_never_starts(groups: RunGroups, tmp_path: Path) -> None:
    group = groups.create()
    marker = tmp_path / "started"
    try:
        group.remove()  # its folders are gone: nothing can join it
        done = subprocess.run(group.born_in(["/bin/touch", str(marker)]), capture_output=True, timeout=30)
        assert done.returncode == JOIN_FAILED
        assert b"cannot join the run's control group" in done.stderr
        assert not marker.exists()
    finally:
        group.remove()


def test_none_without_a_writable_hierarchy(tmp_path: Path) -> None:
    assert open_run_groups(64, 20, root=tmp_path / "absent") is None
    # a v1-looking tree whose own group this process cannot write
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "memory.limit_in_bytes").write_text("0")
    assert open_run_groups(64, 20, root=tmp_path, proc_cgroup="4:memory:/elsewhere\n") is None


def test_groups_a_killed_process_left_are_removed_by_the_next_one() -> None:
    child = subprocess.run(
        [sys.executable, "-c", "from scenariokit.runner.confinement.cgroups import open_run_groups as o\n"
         "g=o(256,20,tag='left')\nr=g.create()\nprint(*(p.path for p in r.places))"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    left = [Path(p) for p in child.stdout.split()]
    if not left:
        pytest.skip(f"no control groups here: {child.stderr[-300:]}")
    assert all(path.exists() for path in left)
    found = open_run_groups(256, 20, tag="next")
    assert found is not None
    try:
        assert not any(path.exists() for path in left)
        assert not any(path.parent.exists() for path in left)
    finally:
        found.close()
