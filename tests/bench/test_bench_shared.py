"""The benches' shared plumbing (``bench/_shared.py``, ``bench/scale.py``): baselines, targets, latency.

Nothing here measures speed; the benches themselves run by hand or with ``nox -s bench``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from scenariokit.domain.model import RunTimings
from scenariokit.runner.confinement.processes import process_table
from scenariokit.runner.worker.browser import DEFAULT_ARGS

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import _shared  # noqa: E402 - bench/ is a folder of scripts, not a package
import scale  # noqa: E402


async def test_the_bare_script_at_once_runs_each_run_once_in_browsers_side_by_side() -> None:
    loads: list[str] = []
    runner, url = await _shared.serve_page(lambda request: loads.append(request.path))
    try:
        seconds = await _shared.bare_playwright(url, 3, at_once=2)
    finally:
        await runner.cleanup()
    assert loads == ["/", "/", "/"]  # three runs, none twice, none lost, whatever the loops' order
    assert seconds > 0


async def test_the_plain_script_launches_with_playwrights_own_flags_and_scenariokits_with_its_own() -> None:
    """The plain script's browser starts its zygote and GPU process as Playwright leaves them (some of
    ``DEFAULT_ARGS`` are Playwright's own too); the bare script's has all of scenariokit's flags."""
    launched: list[list[str]] = []
    earlier = _browsers(os.getpid())  # a browser another test of this process keeps open is not ours
    runner, url = await _shared.serve_page(lambda request: launched.append(_only_new_browser(earlier)))
    try:
        await _shared.bare_playwright(url, 1, plain=True)
        await _shared.bare_playwright(url, 1)
    finally:
        await runner.cleanup()
    plain, tuned = launched
    assert not {"--no-zygote", "--in-process-gpu"} & set(plain)
    assert "--headless" in plain or any(arg.startswith("--headless=") for arg in plain)
    assert set(DEFAULT_ARGS) <= set(tuned)
    assert _shared.plain_launch_options().keys() == {"executable_path", "headless"}


def _browsers(root: int) -> dict[int, list[str]]:
    """The browser processes (Chromium's main process: no ``--type=``) under ``root``, with their argv."""
    found = {}
    table = process_table()
    for pid in _shared.processes_below({pid: info.ppid for pid, info in table.items()}, [root]) - {root}:
        argv = _argv(pid)
        if "--remote-debugging-pipe" in argv and not any(arg.startswith("--type=") for arg in argv):
            found[pid] = argv
    return found


def _only_new_browser(earlier: dict[int, list[str]]) -> list[str]:
    """The argv of the one browser under this process that ``earlier`` does not hold."""
    new = [argv for pid, argv in _browsers(os.getpid()).items() if pid not in earlier]
    assert len(new) == 1, new
    return new[0]


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


def test_a_target_line_says_met_or_not() -> None:
    met = _shared.target_line("same concurrency", 1.04, 1.0)
    assert met == "same concurrency: 1.04x (target >= 1.00x: met)"
    assert _shared.target_line("one at a time", 1.2, 1.5).endswith("(target >= 1.50x: NOT met)")


@pytest.mark.parametrize(("pss_kib", "verdict"), [(250 * 1024, "met"), (301 * 1024, "NOT met")])
def test_the_memory_peak_is_held_to_its_target(pss_kib: int, verdict: str) -> None:
    peak = _shared.MemoryPeak(rss_kib=pss_kib * 2, pss_kib=pss_kib, samples=3)
    assert peak.against_target().endswith(f"target <= {_shared.PSS_TARGET_MIB} MiB: {verdict}")
    assert _shared.MemoryPeak().against_target() == "PSS target not measured"


def test_the_scale_line_gives_the_claims_median_and_95th_percentile() -> None:
    timings = [RunTimings(queued_ms=q, claim_ms=q + 100) for q in range(1, 101)]
    line = scale.Line(processes=2, rate=120.0, timings=[*timings, None])
    assert line.claim_latency() == "queued median 50 ms, p95 95 ms; claim median 150 ms, p95 195 ms"
    assert scale.Line(1, 60.0, [None]).claim_latency() == "no timings"


def test_one_runs_memory_is_its_run_control_groups_and_a_process_in_none_has_none() -> None:
    from scenariokit.runner.confinement.cgroups import PREFIX, RUN_GROUP

    # the groups a pool makes (runner/confinement/cgroups.py), v2 and v1 paths alike
    for path in (f"/{PREFIX}4026531836-812-tag/run-3", f"/process_api/x/{PREFIX}4026531836-812/run-12"):
        assert RUN_GROUP.search(path)
    for path in (f"/{PREFIX}4026531836-812", f"/{PREFIX}4026531836-812/probe", "/run-3"):
        assert not RUN_GROUP.search(path)
    assert _shared.run_group_members(os.getpid()) is None  # this test process is no run


async def test_the_scale_bench_waits_until_the_worker_processes_are_quiet() -> None:
    # a "worker" busy for a while (its pool preparing), then idle: the wait ends only once it is idle.
    # Busy for 1.5 s of its own CPU, not of the clock: on a loaded machine it gets a part of a core.
    busy_then_idle = "import time\nwhile time.process_time() < 1.5: pass\ntime.sleep(30)"
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", busy_then_idle)
    try:
        assert _shared.tree_seconds([child.pid]) >= 0.0
        await _shared.until_quiet([child.pid], settle=0.5, within=60)
        spent = _shared.tree_seconds([child.pid])
        assert spent >= 1.0  # it waited through the busy part, which counts in the child's CPU
        assert child.returncode is None  # and did not wait for the process to end
    finally:
        child.kill()
        await child.wait()


#: the start of a script that runs in a CPU group of its own (bench/ on its path), or says it cannot
_IN_A_GROUP = """
import os, resource, subprocess, sys
sys.path.insert(0, sys.argv[1])
import _shared

with _shared.CpuGroup() as group:
    if not group.available:
        print("unavailable", group.reason)
        raise SystemExit(0)
"""

_BURN_IN_SHORT_PROCESSES = (
    _IN_A_GROUP
    + """    began = group.seconds()
    for _ in range(20):  # each a few milliseconds: /proc's ticks of 10 ms cut most of it off
        subprocess.run([sys.executable, "-S", "-c", "sum(range(300_000))"], check=True)
    spent = group.seconds() - began
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("counted", spent, children.ru_utime + children.ru_stime, group._path)
"""
)


def _in_a_cpu_group(script: str, *args: str) -> str:
    """What ``script`` (run with bench/ as its first argument) printed after its first word; the test is
    skipped where the script printed ``unavailable``: no cgroup v1 ``cpuacct`` group can be made here."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", script, str(BENCH), *args], capture_output=True, text=True, check=True
    )
    kind, *rest = done.stdout.split(maxsplit=1)
    if kind == "unavailable":
        pytest.skip(f"no cgroup v1 cpuacct group can be made here: {rest[0].strip()}")
    return rest[0]


def test_a_cpu_group_counts_the_cpu_of_processes_that_have_exited(tmp_path: Path) -> None:
    spent, children, path = _in_a_cpu_group(_BURN_IN_SHORT_PROCESSES).split()
    # every child ended before the group was read: the group holds their CPU, within the parent's own
    assert float(spent) >= 0.9 * float(children) > 0
    assert not Path(path).exists()  # removed once the bench left it


_LEFT_BY_AN_EARLIER_BENCH = """
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import _shared

home = _shared.own_cpuacct_group()
empty, busy = home / f"bench-cpu-ended-{os.getpid()}", home / f"bench-cpu-alive-{os.getpid()}"
try:
    empty.mkdir()
    busy.mkdir()
except OSError as error:
    print("unavailable", error.strerror or error)
    raise SystemExit(0)
child = subprocess.Popen(["sleep", "60"])  # an earlier bench's browser, still running
try:
    (busy / "cgroup.procs").write_text(str(child.pid))
    with _shared.CpuGroup() as group:
        print("after", empty.exists(), busy.exists(), group.available)
finally:
    (home / "cgroup.procs").write_text(str(child.pid))
    child.kill()
    child.wait()
    for path in (empty, busy):
        if path.exists():
            path.rmdir()
"""


def test_a_cpu_group_removes_an_earlier_benchs_group_once_nothing_is_left_in_it() -> None:
    seen = _in_a_cpu_group(_LEFT_BY_AN_EARLIER_BENCH)
    # the group whose processes all ended is removed; one whose process lives on is kept (the kernel
    # refuses), so a bench running beside this one keeps its count
    assert seen.split() == ["False", "True", "True"]


_SERVER_WITH_SHORT_RUNS = """
import resource, subprocess, sys
sys.stdin.readline()
for _ in range(10):  # a run's processes: each ends within a few ticks of /proc's 10 ms
    subprocess.run([sys.executable, "-S", "-c", "sum(range(300_000))"], check=True)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(children.ru_utime + children.ru_stime, flush=True)
sys.stdin.readline()
"""

_SPLIT_A_SERVERS_CPU = (
    _IN_A_GROUP
    + """    pipe = subprocess.PIPE
    server = subprocess.Popen([sys.executable, "-c", sys.argv[2]], stdin=pipe, stdout=pipe, text=True)
    split = _shared.CpuSplit(server.pid, group)
    split.start()
    server.stdin.write("go\\n")
    server.stdin.flush()
    children = float(server.stdout.readline())
    split.stop()
    server.stdin.write("end\\n")
    server.stdin.flush()
    server.wait()
    print("split", split.seconds["runs"], children, split.describe())
"""
)


def test_a_servers_runs_are_counted_exactly_in_a_cpu_group() -> None:
    seen = _in_a_cpu_group(_SPLIT_A_SERVERS_CPU, _SERVER_WITH_SHORT_RUNS)
    runs, children, described = seen.split(maxsplit=2)
    # the server's children all ended between two reads of /proc: the group holds their CPU
    assert float(runs) >= 0.9 * float(children) > 0
    assert described.strip().endswith("runs counted exactly")


def test_without_a_cpuacct_hierarchy_the_exact_count_is_left_out_saying_why(tmp_path: Path) -> None:
    with _shared.CpuGroup(root=tmp_path / "absent") as group:
        assert not group.available
        assert group.seconds() is None
        assert "no cpuacct group" in group.reason


def test_a_process_alive_before_the_sampler_counts_only_what_it_spends_after(tmp_path: Path) -> None:
    import subprocess
    import time

    # like the driver zygote an earlier pool of the bench's process leaves running: busy, then idle
    busy_then_idle = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    child = subprocess.Popen([sys.executable, "-c", busy_then_idle + "print(flush=True)\ntime.sleep(30)"],
                             stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"
        with _shared.CpuSampler() as sampler:
            time.sleep(0.2)
        assert _shared.process_seconds(child.pid) >= 0.4
        assert sum(sampler.by_component().values()) < 0.1
    finally:
        child.kill()
        child.wait()


def test_after_a_baseline_a_process_older_than_the_sampler_counts_from_the_baseline() -> None:
    import subprocess
    import time

    busy = "import time\nend = time.process_time() + {}\nwhile time.process_time() < end: pass\n"
    # busy before the sampler, then busy again between its start and the baseline, then idle
    script = (
        busy.format(0.4)
        + "print(flush=True)\ninput()\n"
        + busy.format(0.3)
        + "print(flush=True)\ntime.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == b"\n"
        with _shared.CpuSampler() as sampler:
            child.stdin.write(b"\n")
            child.stdin.flush()
            assert child.stdout.readline() == b"\n"
            time.sleep(0.1)  # sampled after its second burst
            sampler.baseline()
            time.sleep(0.2)
        assert sum(sampler.by_component().values()) < 0.1
    finally:
        child.kill()
        child.wait()


_THREAD_THAT_ENDS = """
import threading, time
def burn() -> None:
    end = time.thread_time() + 0.05
    while time.thread_time() < end:
        pass
worker = threading.Thread(target=burn)
worker.start()
worker.join()
print(time.process_time(), flush=True)
time.sleep(30)
"""


def test_a_processs_cpu_is_read_to_below_a_tick_with_its_ended_threads_in_it() -> None:
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", _THREAD_THAT_ENDS], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        own = float(child.stdout.readline())  # what the process itself counted, once its thread ended
        read = _shared.process_seconds(child.pid)
        assert read >= own >= 0.05  # the ended thread's 50 ms are in it (/proc's ticks cut each part down)
        assert read - own < 0.005  # and next to nothing more: the process only sleeps meanwhile
    finally:
        child.kill()
        child.wait()
    with pytest.raises(OSError):
        _shared.process_seconds(child.pid)


#: the zygote's stand-in: a process named ``node`` with ``driver_zygote.js`` in its command line, which
#: reaps a child that spent 200 ms, prints its own CPU, and waits for a line
_REAPS_A_BUSY_CHILD = """
import subprocess, sys, time
busy = "import time\\nend = time.process_time() + 0.2\\nwhile time.process_time() < end: pass"
subprocess.run([sys.executable, "-c", busy], check=True)
print(time.process_time(), flush=True)
sys.stdin.readline()
"""

#: started apart (the test's own process may have started pools and their zygotes): finds its zygote
#: and prints what ``cpu.py`` reads of it, the zygote's own count, then the same once the zygote ended
_FINDS_ITS_ZYGOTE = """
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import _shared

zygote = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
own = float(zygote.stdout.readline())
found = _shared.zygote_of(os.getpid(), _shared.DRIVER_ZYGOTE)
other = _shared.zygote_of(os.getpid(), _shared.WORKER_ZYGOTE)
counted = _shared.reaped_and_own(zygote.pid)
zygote.communicate("\\n")
print(json.dumps([found == zygote.pid, other, counted.seconds, counted.minor_faults, counted.own_seconds,
                  own, _shared.reaped_and_own(zygote.pid), _shared.zygote_of(os.getpid())]))
"""


def test_a_zygotes_reaped_drivers_are_counted_apart_from_its_own_cpu(tmp_path: Path) -> None:
    """``cpu.py`` counts the drivers a driver zygote forked (and the workers a worker zygote forked)
    from what the children it reaped spent, CPU and minor page faults, the whole life of each, apart
    from the zygote's own; it finds each zygote by its command line."""
    import json
    import subprocess

    node = tmp_path / "node"  # named as the zygote's Node is
    node.symlink_to(sys.executable)
    script = tmp_path / "driver_zygote.js"
    script.write_text(_REAPS_A_BUSY_CHILD)
    done = subprocess.run(
        [sys.executable, "-c", _FINDS_ITS_ZYGOTE, str(BENCH), str(node), str(script)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    found, other, reaped, faults, itself, own, after_exit, found_after_exit = json.loads(done.stdout)
    assert found and other is None  # by its command line: a driver zygote's, not a worker zygote's
    assert reaped >= 0.19  # the child's 200 ms, summed by the kernel (/proc gives the sum in ticks)
    assert faults > 100  # a Python's start writes hundreds of pages
    assert abs(itself - own) < 0.02  # the zygote's own, in /proc's ticks
    assert after_exit is None and found_after_exit is None
