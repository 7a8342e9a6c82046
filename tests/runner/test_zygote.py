"""Workers forked from the pool's zygote, and started by exec when it cannot serve (docs/security.md)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from process_checks import children, skip_if_left_out
from scenariokit.domain.job import LogEvent, RunEvent, RunFinished, RunJob
from scenariokit.runner.confinement import zygote as zygote_module
from scenariokit.runner.confinement.processes import process_table
from scenariokit.runner.confinement.sandbox import (
    SandboxConfig,
    WorkerCommand,
    bubblewrap_path,
    bubblewrap_works,
    sandbox_command,
    sandbox_join_problem,
    sandbox_user_depth,
    user_namespace_depth,
    worker_environment,
)
from scenariokit.runner.confinement.zygote import Zygote, ZygoteUnavailable
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.protocol import ForkRequest, SandboxNamespaces

in_session = pytest.mark.asyncio(loop_scope="session")
JobFactory = Callable[..., RunJob]
Runner = Callable[..., Awaitable[tuple[RunFinished, list[RunEvent]]]]


def marked_sandbox(**fields: Any) -> SandboxConfig:
    """The environment's sandbox settings, passing the browser marker (see conftest.py) to workers."""
    return SandboxConfig.from_env(pass_env=("RUNNER_TEST_MARK",), **fields)


def parent(pid: int) -> int:
    return process_table()[pid].ppid


def install_plugin(folder: Path, name: str, source: str) -> None:
    """A plugin module and its distribution's entry point in ``folder`` (put it on ``sys.path``)."""
    (folder / f"{name}_plugin.py").write_text(source)
    info = folder / f"{name}_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[scenariokit]\n{name} = {name}_plugin\n")


@in_session
async def test_workers_are_forked_from_the_zygote_and_it_ends_with_the_pool(
    run: Runner, make_job: JobFactory
) -> None:
    pool = WorkerPool(1, sandbox=marked_sandbox())
    await pool.start()
    try:
        skip_if_left_out(pool, "the worker zygote")
        assert pool.zygote is not None and pool.zygote.pid is not None
        zygote = pool.zygote.pid
        for pid in pool.worker_pids():  # the zygote's own child: no go-between
            assert parent(pid) == zygote
        # what the zygote imported is frozen: a worker's collector never writes into those pages
        frozen = "import gc\nprint('frozen', gc.get_freeze_count() > 1000)"
        # and it loaded the installed plugins (the bundled fake-data plugin's helpers are there)
        plugins = (
            "from scenariokit.runner.worker import plugin_hooks\n"
            "print('preloaded', plugin_hooks._preloaded is not None)\n"
            "print('helper', callable(helpers.fake.email))"
        )
        outcome, events = await run(make_job(frozen, plugins), pool)
        assert outcome.status == "pass", outcome.error
        said = [event.message for event in events if isinstance(event, LogEvent)]
        assert {"frozen True", "preloaded True", "helper True"} <= set(said), said
    finally:
        await pool.close()
    assert zygote not in process_table()


@in_session
@pytest.mark.parametrize("mode", ["bubblewrap", "off"])
async def test_without_a_zygote_workers_start_by_exec(run: Runner, make_job: JobFactory, mode: str) -> None:
    if mode == "bubblewrap" and not bubblewrap_works():
        pytest.skip("bubblewrap cannot start a sandbox on this machine")
    pool = WorkerPool(1, sandbox=SandboxConfig(mode=mode, pass_env=("RUNNER_TEST_MARK",), zygote=False))
    await pool.start()
    try:
        assert pool.zygote is None
        outcome, _ = await run(make_job("print('by exec')"), pool)
        assert outcome.status == "pass", outcome.error
        # The run's worker is retired, and warm ones made before the drivers' preparations are replaced
        # once those are made: on a busy machine no worker may be ready just now, so wait for one.
        for _ in range(300):
            if pool.worker_pids():
                break
            await asyncio.sleep(0.1)
        assert pool.worker_pids() and all(parent(pid) == os.getpid() for pid in pool.worker_pids())
    finally:
        await pool.close()


@in_session
async def test_a_dead_zygote_is_started_again_and_workers_start_by_exec_meanwhile(
    run: Runner, make_job: JobFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    pool = WorkerPool(1, sandbox=marked_sandbox())
    await pool.start()
    try:
        skip_if_left_out(pool, "the worker zygote")
        assert pool.zygote is not None and pool.zygote.pid is not None
        first = pool.zygote.pid
        monkeypatch.setattr(zygote_module, "RESTART_DELAY_SECONDS", 3600.0)
        os.kill(first, signal.SIGKILL)
        for _ in range(50):
            if pool.zygote.pid is None:
                break
            await asyncio.sleep(0.1)
        outcome, _ = await run(make_job("print('after the zygote died')"), pool)  # a warm worker
        assert outcome.status == "pass", outcome.error
        outcome, _ = await run(make_job("print('by exec')"), pool)  # started while it was gone
        assert outcome.status == "pass", outcome.error
        for _ in range(100):  # the replacements start in the background
            if "worker started by exec: the zygote is not running" in caplog.text:
                break
            await asyncio.sleep(0.1)
        assert "worker started by exec: the zygote is not running" in caplog.text

        monkeypatch.setattr(zygote_module, "RESTART_DELAY_SECONDS", 0.0)

        def forked_again() -> bool:
            zygote = pool.zygote
            assert zygote is not None
            workers = pool.worker_pids()
            return (
                zygote.pid not in (None, first)
                and bool(workers)
                and all(parent(pid) == zygote.pid for pid in workers)
            )

        # The zygote starts again as a worker asks for it; a replacement worker asked for meanwhile is
        # still started by exec, so a run or two may pass before every warm worker is forked again.
        for _ in range(10):
            outcome, _ = await run(make_job("print('forked again')"), pool)
            assert outcome.status == "pass", outcome.error
            for _ in range(50):  # the next worker starts in the background
                if forked_again():
                    break
                await asyncio.sleep(0.1)
            if forked_again():
                break
        assert pool.zygote.pid not in (None, first)
        workers = pool.worker_pids()
        assert {pid: parent(pid) for pid in workers} == dict.fromkeys(workers, pool.zygote.pid)
    finally:
        await pool.close()


@in_session
async def test_a_plugin_that_starts_a_thread_when_imported_has_workers_start_by_exec(
    run: Runner,
    make_job: JobFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A fork copies no thread, and a lock one held stays held in the child: the zygote says so and
    the pool starts every worker by exec, where the plugin is loaded (thread and all) as it expects."""
    caplog.set_level(logging.WARNING)
    install_plugin(
        tmp_path,
        "thready",
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(3600,), name='thready-poller', daemon=True).start()\n"
        "from scenariokit.plugins import hookimpl\n"
        "@hookimpl\n"
        "def scenariokit_step_helpers(job):\n"
        "    return {'thready': threading.active_count()}\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers' import path is the service's
    pool = WorkerPool(1, sandbox=SandboxConfig(mode="off", pass_env=("RUNNER_TEST_MARK",)))
    await pool.start()
    try:
        assert pool.zygote is None
        assert "a plugin started a thread while it was imported (thready-poller)" in caplog.text
        outcome, events = await run(make_job("print('threads', helpers.thready > 1)"), pool)
        assert outcome.status == "pass", outcome.error
        assert "threads True" in [event.message for event in events if isinstance(event, LogEvent)]
        assert all(parent(pid) == os.getpid() for pid in pool.worker_pids())
    finally:
        await pool.close()


@in_session
async def test_a_plugin_that_fails_to_load_is_reported_by_each_workers_run(
    run: Runner, make_job: JobFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_plugin(tmp_path, "broken", "raise RuntimeError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pool = WorkerPool(1, sandbox=SandboxConfig(mode="off", pass_env=("RUNNER_TEST_MARK",)))
    await pool.start()
    try:
        assert pool.zygote is not None  # it serves: plugins are then each worker's to load
        outcome, events = await run(make_job("print('ran')"), pool)
        assert outcome.status == "pass", outcome.error
        said = [event.message for event in events if isinstance(event, LogEvent)]
        assert "ran" in said
        assert any("plugins unavailable: RuntimeError: broken on purpose" in line for line in said), said
        assert all(parent(pid) == pool.zygote.pid for pid in pool.worker_pids())
    finally:
        await pool.close()


@attrs.frozen
class SandboxAtHand:
    """A zygote, a worker's sandbox (its shell said ready) and the descriptors a fork request gives."""

    zygote: Zygote
    command: WorkerCommand
    described: dict[str, Any]
    #: the worker's end of its channel (given in the request) and the pool's
    channel: socket.socket
    pool_end: socket.socket
    output: int

    @property
    def namespaces(self) -> dict[str, int]:
        return {name: self.described[f"{name}-namespace"] for name in ("mnt", "pid", "ipc")}


@contextlib.contextmanager
def sandbox_at_hand(tmp_path: Path, *bwrap_flags: str) -> Iterator[SandboxAtHand]:
    """A zygote and a worker's sandbox as the pool makes them (``bwrap_flags`` added), both ended after."""
    import json
    import subprocess

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    zygote = Zygote(worker_environment("/tmp/scenariokit-run"))
    zygote.start()
    info_read, info_write = os.pipe()
    command = sandbox_command(run_dir, SandboxConfig(), None, info_write, user=0x7000_0FFF)
    argv = [command.argv[0], *bwrap_flags, *command.argv[1:]]
    box = subprocess.Popen(argv, pass_fds=(info_write,), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    os.close(info_write)
    ours, theirs = socket.socketpair()
    out_read, out_write = os.pipe()
    try:
        described = json.loads(os.fdopen(info_read, "rb").read())
        assert box.stdout is not None and box.stdout.readline() == b"ready\n"
        yield SandboxAtHand(zygote, command, described, theirs, ours, out_write)
    finally:
        box.kill()
        box.wait()
        zygote.close()
        for fd in (out_read, out_write):
            os.close(fd)
        ours.close()
        theirs.close()


@pytest.mark.skipif(os.geteuid() != 0 or not bubblewrap_works(), reason="the zygote joins sandboxes as root")
def test_no_worker_is_forked_outside_its_sandbox_and_a_refusing_zygote_is_given_up(tmp_path: Path) -> None:
    """A pidfd of a process that is not the sandbox (a reused pid): the worker never starts."""
    with sandbox_at_hand(tmp_path) as box:
        wrong = os.pidfd_open(os.getpid())  # the host's namespaces, not the sandbox's
        request = ForkRequest(
            uid=0x7000_0FFF,
            env=box.command.env,
            cwd=box.command.inner_dir,
            sandbox=SandboxNamespaces(**box.namespaces),
        )
        for _ in range(zygote_module.GIVE_UP_AFTER):
            with pytest.raises(ZygoteUnavailable, match="not in the sandbox's mnt namespace"):
                box.zygote.fork(request, [box.channel.fileno(), box.output, box.output, wrong])
        os.close(wrong)
        # a zygote that cannot set workers up on this machine is given up on: all start by exec
        with pytest.raises(ZygoteUnavailable, match="could not set workers up"):
            box.zygote.ensure_running()


def test_whether_a_zygote_serves_is_found_by_trying_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert zygote_module.zygote_problem("none") is None
    if bubblewrap_works():
        # it serves root and an ordinary user alike: root joins a sandbox from the host's user
        # namespace; a user's bubblewrap makes one of its own, which a go-between enters first
        assert zygote_module.zygote_problem("bubblewrap") is None
        bwrap = bubblewrap_path()
        assert bwrap is not None
        from_host = sandbox_join_problem(bwrap)
        through_its_own = sandbox_join_problem(bwrap, own_user_namespace=True)
        if os.geteuid() == 0:
            assert from_host is None
            assert through_its_own is not None and "no user namespace of its own" in through_its_own
            assert sandbox_user_depth(bwrap) is None  # the sandbox shares root's user namespace
        else:
            assert from_host is not None and "setns: Operation not permitted" in from_host
            assert through_its_own is None
            # bubblewrap makes a user namespace and one inside it: the driver zygote's exact depth
            depth = sandbox_user_depth(bwrap)
            assert depth is not None and depth >= 1, depth
    assert user_namespace_depth(os.getpid()) == 0

    def no_pidfd(pid: int) -> int:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    zygote_module.pidfd_problem.cache_clear()
    try:
        assert zygote_module.zygote_problem("none") == "pidfd_open: Function not implemented"
        assert not zygote_module.zygote_supported("bubblewrap")
    finally:
        monkeypatch.undo()
        zygote_module.pidfd_problem.cache_clear()


@pytest.mark.skipif(os.geteuid() != 0 or not bubblewrap_works(), reason="root makes the user namespace here")
def test_a_worker_enters_a_sandbox_in_a_user_namespace_of_its_own_with_no_capability(tmp_path: Path) -> None:
    """What an ordinary user's bubblewrap makes (a user namespace of the sandbox's own), made by root
    with ``--unshare-user``: the worker is forked through a go-between that enters it, is born in the
    sandbox's namespaces as the zygote's own child, and holds no capability there. It keeps root's
    id, the one bubblewrap maps into that namespace: its own would be unmapped."""
    with sandbox_at_hand(tmp_path, "--unshare-user") as box:
        first = int(box.described["child-pid"])
        own_user = os.stat(f"/proc/{first}/ns/user").st_ino
        assert own_user != os.stat("/proc/self/ns/user").st_ino
        request = ForkRequest(
            env=box.command.env,
            cwd=box.command.inner_dir,
            sandbox=SandboxNamespaces(**box.namespaces, user=own_user),
        )
        pidfd = os.pidfd_open(first)
        try:
            forked = box.zygote.fork(request, [box.channel.fileno(), box.output, box.output, pidfd])
        finally:
            os.close(pidfd)
        try:
            status = Path(f"/proc/{forked.pid}/status").read_text()
            held = {line.split(":")[0]: line.split(":")[1].strip() for line in status.splitlines()}
            for kind in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                assert int(held[kind], 16) == 0, (kind, held[kind])
            assert held["NoNewPrivs"] == "1"
            assert parent(forked.pid) == box.zygote.pid  # no go-between left behind
            for name, inode in {**box.namespaces, "user": own_user}.items():
                assert os.stat(f"/proc/{forked.pid}/ns/{name}").st_ino == inode, name
            box.pool_end.close()  # the worker reads no options: it ends
            assert forked.wait(15.0) is not None
        finally:
            forked.close()


def test_a_malformed_request_is_refused_and_the_zygote_keeps_serving(tmp_path: Path) -> None:
    zygote = Zygote(worker_environment(str(tmp_path)))
    zygote.start()
    try:
        assert zygote._control is not None and zygote.pid is not None
        socket.send_fds(zygote._control, [b'{"env": {}}'], [0])  # no type, one descriptor: not a request
        forged = b'{"type": "ForkRequest", "env": {}, "cwd": "/", "argv": ["sh"]}'  # a field no request has
        socket.send_fds(zygote._control, [forged], [0, 1, 2, 2])
        ours, theirs = socket.socketpair()
        out_read, out_write = os.pipe()
        env = worker_environment(str(tmp_path))
        forked = zygote.fork(ForkRequest(env=env, cwd=str(tmp_path)), [theirs.fileno(), out_write, out_write])
        theirs.close()
        os.close(out_write)
        ours.close()  # no options ever come: the worker exits at once, and says why on its stderr
        assert forked.wait(20.0) == 1
        assert b"EOFError" in os.read(out_read, 65536)
        forked.close()
        os.close(out_read)
        for _ in range(50):  # it is reaped once we stop listening; a second server never would
            children = [pid for pid, info in process_table().items() if info.ppid == zygote.pid]
            if not children:
                break
            time.sleep(0.1)
        assert children == []
    finally:
        zygote.close()


def _gone(pid: int) -> bool:
    """Whether ``pid`` leaves the process table (reaped, not a zombie) within five seconds."""
    for _ in range(50):
        if pid not in process_table():
            return True
        time.sleep(0.1)
    return False


def _waiting_worker(zygote: Zygote, folder: Path) -> tuple[Any, socket.socket]:
    """A worker forked from ``zygote`` that waits for options that never come (while ``ours`` is open)."""
    ours, theirs = socket.socketpair()
    env = worker_environment(str(folder))
    forked = zygote.fork(ForkRequest(env=env, cwd=str(folder)), [theirs.fileno(), 2, 2])
    theirs.close()
    return forked, ours


@pytest.fixture
def started_zygote(tmp_path: Path) -> Iterator[Zygote]:
    zygote = Zygote(worker_environment(str(tmp_path)))
    zygote.start()
    try:
        yield zygote
    finally:
        zygote.close()


def test_the_zygote_reports_a_killed_worker_and_keeps_its_pid_until_the_pool_stops_listening(
    started_zygote: Zygote, tmp_path: Path
) -> None:
    """The worker is the zygote's own child: no go-between forks it or waits for it."""
    forked, ours = _waiting_worker(started_zygote, tmp_path)
    assert children(started_zygote.pid or 0) == [forked.pid]
    os.kill(forked.pid, signal.SIGKILL)
    assert forked.wait(20.0) == -signal.SIGKILL
    time.sleep(0.2)
    assert process_table()[forked.pid].ppid == started_zygote.pid  # ended, not reaped: its pid is its
    forked.close()
    assert _gone(forked.pid)
    ours.close()


def test_a_worker_the_pool_stopped_listening_to_is_reaped_as_soon_as_it_ends(
    started_zygote: Zygote, tmp_path: Path
) -> None:
    forked, ours = _waiting_worker(started_zygote, tmp_path)
    forked.close()  # before it ended: nobody will read how it did
    time.sleep(0.2)
    assert forked.pid in process_table()  # still running
    ours.close()  # no options will come: it exits
    assert _gone(forked.pid)  # and no zombie is left behind
    again, ours = _waiting_worker(started_zygote, tmp_path)  # the zygote serves on
    ours.close()
    assert again.wait(20.0) == 1
    again.close()


def test_the_zygote_ends_once_the_pool_has_gone_and_its_workers_have_ended(tmp_path: Path) -> None:
    zygote = Zygote(worker_environment(str(tmp_path)))
    zygote.start()
    process = zygote._process
    assert process is not None
    forked, ours = _waiting_worker(zygote, tmp_path)
    control = zygote._control
    assert control is not None
    control.shutdown(socket.SHUT_RDWR)  # the pool is gone: no more requests
    time.sleep(0.3)
    assert process.poll() is None  # it still reports on its worker
    ours.close()
    assert forked.wait(20.0) == 1
    forked.close()
    assert process.wait(timeout=20.0) == 0
    zygote.close()
