"""What warm one-run workers promise: a user id of their own, no secret before their run, one run each.

These run on the session's shared pool (two workers, the environment's sandbox mode) with real Chromium.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from scenariokit.domain.job import CredentialValue, LogEvent, RunEvent, RunFinished, RunJob
from scenariokit.runner.confinement.processes import process_table, process_tree
from scenariokit.runner.confinement.sandbox import WORKER_UIDS
from scenariokit.runner.parent.executor import WorkerPool

JobFactory = Callable[..., RunJob]
Runner = Callable[..., Awaitable[tuple[RunFinished, list[RunEvent]]]]

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

SECRET = "Warm-Spare-S3cret!"


def printed(events: list[object], prefix: str) -> list[str]:
    """What the run printed after ``prefix`` (its log lines that start with it)."""
    lines = [e.message for e in events if isinstance(e, LogEvent)]
    return [line[len(prefix) :] for line in lines if line.startswith(prefix)]


def started_with(pid: int) -> tuple[bytes, bytes]:
    """A process's environment and command line (empty when it is gone or hidden)."""
    found = []
    for part in ("environ", "cmdline"):
        try:
            found.append(Path(f"/proc/{pid}/{part}").read_bytes())
        except OSError:
            found.append(b"")
    return found[0], found[1]


def own_ids(pool: WorkerPool) -> bool:
    return pool.sandbox_kind == "bubblewrap" and os.geteuid() == 0


async def test_concurrent_sandboxed_runs_have_user_ids_and_process_limits_of_their_own(
    full_pool: WorkerPool, run: Runner, make_job: JobFactory
) -> None:
    if not own_ids(full_pool):
        pytest.skip("workers get user ids of their own only under bubblewrap with the service as root")
    # Each run holds 400 threads (under its limit of 512 more) while the other holds as many: with one
    # user for both, the second 400 would pass the first run's limit ("can't start new thread").
    code = (
        "import asyncio, os, threading\n"
        "print('uid', os.getuid())\n"
        "threading.stack_size(256 * 1024)\n"
        "stop = threading.Event()\n"
        "held = [threading.Thread(target=stop.wait, daemon=True) for _ in range(200)]\n"
        "for t in held: t.start()\n"
        "await asyncio.sleep(1.5)\n"
        "more = [threading.Thread(target=stop.wait, daemon=True) for _ in range(200)]\n"
        "for t in more: t.start()\n"
        "print('threads', len(held) + len(more))\n"
        "await asyncio.sleep(1.5)\n"
        "stop.set()\n"
    )
    jobs = [make_job(code, step_timeout=30), make_job(code, step_timeout=30)]

    (first, first_events), (second, second_events) = await asyncio.gather(*(run(job) for job in jobs))

    assert first.status == "pass", first.error
    assert second.status == "pass", second.error
    uids = [int(printed(events, "uid ")[0]) for events in (first_events, second_events)]
    assert uids[0] != uids[1] and all(uid in WORKER_UIDS for uid in uids), uids
    assert printed(first_events, "threads ") == printed(second_events, "threads ") == ["400"]


async def test_a_warm_worker_holds_no_secret_before_its_run(
    full_pool: WorkerPool, run: Runner, make_job: JobFactory
) -> None:
    job = make_job(
        "await page.goto(helpers.getEnvUrl())\nprint('mine', helpers.credentials['admin'].secret)",
        credentials=(CredentialValue(alias="admin", username="alice", secret=SECRET),),
    )
    running = asyncio.ensure_future(run(job))
    try:
        await asyncio.sleep(0.5)  # the run took a worker; the others wait warm for the next runs
        warm = [w for w in full_pool._workers if w.ready and not w.used]
        assert warm, "no warm worker to look at"
        for worker in warm:
            assert worker.secrets == ()
            assert worker.pid is not None
            for pid in process_tree(worker.pid):  # worker, driver, browser: what they were started with
                environ, cmdline = started_with(pid)
                assert SECRET.encode() not in environ + cmdline, pid
                assert b"SCENARIOKIT_" not in environ, pid
    finally:
        outcome, events = await running
    assert outcome.status == "pass", outcome.error
    assert printed(events, "mine ") == ["***"]


async def test_no_worker_serves_a_second_run(
    full_pool: WorkerPool, run: Runner, make_job: JobFactory
) -> None:
    # A run leaves a mark in its interpreter and reports any mark it finds: one run per process, so
    # no run ever finds one, however many runs the pool's workers (warm spares included) have served.
    code = (
        "import builtins, uuid\n"
        "print('found', getattr(builtins, '_left_by_a_run', None))\n"
        "builtins._left_by_a_run = str(uuid.uuid4())\n"
    )
    found = []
    for _ in range(full_pool.size + 2):
        outcome, events = await run(make_job(code))
        assert outcome.status == "pass", outcome.error
        found += printed(events, "found ")
    assert found == ["None"] * (full_pool.size + 2)


async def test_workers_read_the_compile_cache_the_pool_filled_and_cannot_write_it(
    full_pool: WorkerPool, run: Runner, make_job: JobFactory
) -> None:
    for _ in range(600):  # filled in the background once the pool started
        if full_pool.node_cache is not None:
            break
        await asyncio.sleep(0.1)
    assert full_pool.node_cache is not None, "the pool did not fill the driver's compile cache"
    filled = full_pool.node_cache.compile_cache
    assert filled is not None
    code = (
        "import os\n"
        "cache = os.environ.get('NODE_COMPILE_CACHE')\n"
        "print('cache', cache)\n"
        "if cache:\n"
        "    try:\n"
        "        target = os.path.join(cache, os.listdir(cache)[0], 'planted')\n"
        "        open(target, 'w').write('x')\n"
        "        print('write', 'written')\n"
        "    except OSError as exc:\n"
        "        print('write', type(exc).__name__)\n"
    )
    seen: list[str] = []
    writes: list[str] = []
    for _ in range(full_pool.size + 2):  # the workers started before the cache was filled go first
        outcome, events = await run(make_job(code))
        assert outcome.status == "pass", outcome.error
        seen, writes = printed(events, "cache "), printed(events, "write ")
        if seen != ["None"]:
            break
    assert seen != ["None"], "no worker was given the compile cache"
    if full_pool.sandbox_kind == "bubblewrap":  # off: the worker is the service's user, as everywhere
        assert writes and writes[0] in {"OSError", "PermissionError"}, writes
        assert not list(filled.rglob("planted"))
    assert re.match(r"^v\d+", filled.name)


async def test_what_a_run_started_dies_with_its_worker(
    full_pool: WorkerPool, run: Runner, make_job: JobFactory
) -> None:
    # A process in a session of its own, its parent gone: only the worker's sandbox (or, without
    # bubblewrap, the pool's search of the process table) still ties it to the run.
    mark = f"300.{uuid.uuid4().int % 10**9:09d}"
    code = (
        "import os, subprocess\n"
        "if os.fork() == 0:\n"
        f"    subprocess.Popen(['sleep', '{mark}'], start_new_session=True)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    outcome, _ = await run(make_job(code))
    assert outcome.status == "pass", outcome.error

    for _ in range(100):
        if not sleeping_with(mark):
            break
        await asyncio.sleep(0.1)
    assert not sleeping_with(mark), "a process the run started outlived its worker"


def sleeping_with(mark: str) -> list[int]:
    """The live processes whose command line holds ``mark``."""
    found = []
    for pid, info in process_table().items():
        if info.zombie:
            continue
        try:
            if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found
