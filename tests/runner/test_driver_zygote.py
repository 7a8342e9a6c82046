"""The driver zygote: a pool that runs one gives each run a driver forked from it, or the ordinary one.

Checked with the real Node shipped with Playwright: that it can be a zygote, that a worker's
Playwright gets a forked driver that runs the whole protocol (HTTP included), and that a requester
the zygote refuses still gets a driver, started the ordinary way by the launcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from test_driver_snapshot import (
    BROWSER_PROCESSES,
    DEVICES_SENT,
    HTTP_FROM_THE_DRIVER,
    browser_runs_its_network_service_inside,
    devices_sent,
    printed,
    run_collecting,
)

from process_checks import children, skip_if_left_out
from scenariokit.domain.job import RunJob
from scenariokit.runner.confinement.driver_snapshot import NODE_PATH_ENV, bundled_driver, warm_up_options
from scenariokit.runner.confinement.driver_zygote import (
    DRIVER_ZYGOTE_ENV,
    SOCKET_NAME,
    ZYGOTE_LAUNCHER_NAME,
    DriverZygote,
    forked_driver,
    zygote_socket,
    zygote_supported,
)
from scenariokit.runner.confinement.sandbox import SandboxConfig, SandboxMode, bubblewrap_works
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.worker.browser import discover_browser


def test_the_node_shipped_with_playwright_can_be_a_driver_zygote() -> None:
    found = bundled_driver()
    assert found is not None
    assert zygote_supported(found[0])


def test_the_flag_is_on_unless_set_off_and_takes_the_sandboxs_yes_and_no() -> None:
    assert SandboxConfig.from_env({}).driver_zygote is True
    assert SandboxConfig.from_env({DRIVER_ZYGOTE_ENV: "no"}).driver_zygote is False
    with pytest.raises(ValueError):
        SandboxConfig.from_env({DRIVER_ZYGOTE_ENV: "maybe"})


def test_a_node_without_ffi_cannot_be_a_zygote(tmp_path: Path) -> None:
    old = tmp_path / "node"
    old.write_text("#!/bin/sh\necho v22.11.0\n")
    old.chmod(0o755)
    assert not zygote_supported(old)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_sandboxed_zygote_refuses_a_requester_outside_any_sandbox_who_starts_node_itself(
    tmp_path: Path,
) -> None:
    fallback = tmp_path / "ordinary-node"
    fallback.write_text('#!/bin/sh\necho started the ordinary way: "$@"\n')
    fallback.chmod(0o755)
    folder = tmp_path / "zygote"
    folder.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    zygote = await DriverZygote.start(folder, env, sandboxed=True, fallback=str(fallback))
    assert zygote is not None
    try:
        assert (folder / SOCKET_NAME).is_socket()
        launcher = folder / ZYGOTE_LAUNCHER_NAME
        started = await asyncio.to_thread(
            subprocess.run,
            [str(launcher), "cli.js", "run-driver"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        # refused (this test is in no sandbox): the launcher started the driver the ordinary way
        assert started.returncode == 0, started.stderr
        assert started.stdout == "started the ordinary way: cli.js run-driver\n"
        assert zygote.running
    finally:
        zygote.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_requester_whose_variable_read_while_loading_differs_gets_the_ordinary_driver(
    tmp_path: Path,
) -> None:
    fallback = tmp_path / "ordinary-node"
    fallback.write_text("#!/bin/sh\necho started the ordinary way\n")
    fallback.chmod(0o755)
    folder = tmp_path / "zygote"
    folder.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PW_CLI_DISPLAY_VERSION": "1",
    }
    zygote = await DriverZygote.start(folder, env, sandboxed=False, fallback=str(fallback))
    assert zygote is not None
    launcher = [str(folder / ZYGOTE_LAUNCHER_NAME), "cli.js", "run-driver"]
    try:
        for version, expected in (("1", ""), ("2", "started the ordinary way\n")):
            started = await asyncio.to_thread(
                subprocess.run,
                launcher,
                input="",  # a forked driver ends with its standard input, saying nothing
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp_path,
                env={**env, "PW_CLI_DISPLAY_VERSION": version},
            )
            assert (started.returncode, started.stdout) == (0, expected), (version, started.stderr)
    finally:
        zygote.close()


async def _zygote_for_tests(
    tmp_path: Path, env: dict[str, str], warm_up: Mapping[str, object] | None = None
) -> DriverZygote:
    folder = tmp_path / "zygote"
    folder.mkdir()
    zygote = await DriverZygote.start(folder, env, sandboxed=False, fallback="/bin/false", warm_up=warm_up)
    assert zygote is not None
    return zygote


async def _warmed_zygote_for_tests(tmp_path: Path) -> tuple[DriverZygote, dict[str, str]]:
    """A zygote warmed up as a pool's is (the workers' browser), and the environment it serves."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    warm_up = warm_up_options({"executable_path": discover_browser().executable}, scratch)
    return await _zygote_for_tests(tmp_path, env, warm_up=warm_up), env


def _command(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_worker_asks_the_zygote_itself_with_its_environment_and_the_driver_is_the_zygotes_child(
    tmp_path: Path,
) -> None:
    """No launcher: the request carries the environment, which a forked worker's /proc does not show.
    The driver is forked by the zygote itself (no go-between), and reaped by it once it ends."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PW_CLI_DISPLAY_VERSION": "1",
    }
    zygote = await _zygote_for_tests(tmp_path, env)
    socket_path = zygote_socket(str(zygote.folder / ZYGOTE_LAUNCHER_NAME))
    assert socket_path == str(zygote.folder / SOCKET_NAME)
    try:
        # a variable the driver read while loading differs: refused, so the caller starts its own
        assert await forked_driver(socket_path, {**env, "PW_CLI_DISPLAY_VERSION": "2"}, 2) is None
        driver = await forked_driver(socket_path, env, 2)
        assert driver is not None
        (forked,) = children(zygote.pid)  # not a go-between's child: the zygote's own
        assert b"driver_zygote.js" in _command(forked)
        assert os.readlink(f"/proc/{forked}/cwd") == os.getcwd()  # the requester's, read from the kernel
        assert await asyncio.wait_for(driver.communicate(), 30) == (None, None)  # ends with its input
        for _ in range(100):  # reaped by the zygote, not left a zombie
            if not children(zygote.pid):
                break
            await asyncio.sleep(0.05)
        assert children(zygote.pid) == []
    finally:
        zygote.close()


def _trickle(socket_path: str, seconds: float) -> None:
    """Connect, send the start of a request with its descriptors, then a byte every 0.1 s."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as zygote:
        zygote.connect(socket_path)
        read, write = os.pipe()
        socket.send_fds(zygote, [b'{"argv": ["run-driver"], "env": ["A=b"'], [read, write, 2])
        os.close(read)
        os.close(write)
        began = time.monotonic()
        with contextlib.suppress(OSError):  # the zygote gave up on it
            while time.monotonic() - began < seconds:
                zygote.send(b" ")
                time.sleep(0.1)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_request_that_trickles_in_holds_the_zygote_half_a_second_at_most(tmp_path: Path) -> None:
    """A request may take more than one read (a worker's environment), but not more than half a second:
    step code can reach the socket, and every other run's request waits behind the one being read."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    zygote = await _zygote_for_tests(tmp_path, env)
    try:
        socket_path = str(zygote.folder / SOCKET_NAME)
        trickling = asyncio.ensure_future(asyncio.to_thread(_trickle, socket_path, 3.0))
        await asyncio.sleep(0.2)  # the zygote is reading it
        began = time.monotonic()
        driver = await forked_driver(socket_path, env, 2)
        waited = time.monotonic() - began
        assert driver is not None
        assert waited < 1.5, waited
        await asyncio.wait_for(driver.communicate(), 30)
        await trickling
    finally:
        zygote.close()


def _ask_after_a_signal(socket_path: str, zygote_pid: int, env: Mapping[str, str]) -> bytes:
    """Connect, let the zygote wait in its read of the request, signal it, then ask: its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as zygote:
        zygote.connect(socket_path)
        time.sleep(0.1)  # the zygote accepted, and waits for the request
        os.kill(zygote_pid, signal.SIGCHLD)  # what a driver that ends sends it
        time.sleep(0.05)
        stdin_read, stdin_write = os.pipe()
        request = json.dumps({"argv": ["run-driver"], "env": [f"{k}={v}" for k, v in env.items()]})
        socket.send_fds(zygote, [request.encode()], [stdin_read, 1, 2])
        os.close(stdin_read)
        answer = zygote.recv(8)
        os.close(stdin_write)  # a forked driver ends with its standard input
        while zygote.recv(64):  # and its end of the connection closes as it exits
            pass
        return answer


@pytest.mark.asyncio(loop_scope="session")
async def test_a_request_the_zygote_was_reading_when_a_driver_ended_is_served(tmp_path: Path) -> None:
    """A driver ending sends the zygote SIGCHLD, which interrupts its read of the next request (the
    kernel does not restart a read on a socket with a timeout): that read is tried again, not refused."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    zygote = await _zygote_for_tests(tmp_path, env)
    try:
        socket_path = str(zygote.folder / SOCKET_NAME)
        asking = asyncio.to_thread(_ask_after_a_signal, socket_path, zygote.pid, env)
        assert await asyncio.wait_for(asking, 30) == b"started\n"
    finally:
        zygote.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_requester_gone_before_asking_is_not_logged_as_refused_and_a_bad_request_is(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A worker killed between connecting and asking (its pool closing) leaves an empty connection: the
    zygote says nothing of it. A request that is not one for a driver is still refused aloud, and the
    zygote serves on after both."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    zygote = await _zygote_for_tests(tmp_path, env)
    try:
        socket_path = str(zygote.folder / SOCKET_NAME)
        for request in (b"", b'["not-a-driver"]'):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as requester:
                requester.connect(socket_path)
                requester.sendall(request)
                requester.shutdown(socket.SHUT_WR)
                assert requester.recv(8) == b""  # closed by the zygote, with no driver
        driver = await forked_driver(socket_path, env, 2)
        assert driver is not None
        await asyncio.wait_for(driver.communicate(), 30)
    finally:
        zygote.close()
    logged = capfd.readouterr().err
    assert logged.count("request refused") == 1, logged
    assert "request refused: not a request for a driver" in logged


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_a_forked_driver_keeps_v8s_areas_out_of_the_browsers_it_starts(tmp_path: Path) -> None:
    """V8 maps its heap and code MADV_DONTFORK, and the zygote makes them inheritable for its forks; a
    driver marks them so again, so the fork that starts its browser does not copy their page tables
    (without it: about 80 MB more for each browser start, and its exec frees them again)."""
    zygote, env = await _warmed_zygote_for_tests(tmp_path)
    try:
        socket_path = zygote_socket(str(zygote.folder / ZYGOTE_LAUNCHER_NAME))
        assert socket_path is not None
        driver = await forked_driver(socket_path, env, 2)
        assert driver is not None
        (forked,) = children(zygote.pid)
        kept = 0
        for _ in range(100):
            kept = _kept_from_children_kib(forked)
            if kept > 20 * 1024:
                break
            await asyncio.sleep(0.05)
        assert kept > 20 * 1024, kept
        await asyncio.wait_for(driver.communicate(), 30)
    finally:
        zygote.close()


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_a_warmed_zygote_keeps_no_socket_of_its_warm_up_page_for_the_drivers_it_forks(
    tmp_path: Path,
) -> None:
    """The warm-up fetches its page from a server on 127.0.0.1 in the zygote, as a run's driver does
    its run's: that server, and every connection to it, is closed before the zygote says ready, so no
    driver it forks into a sandbox inherits a socket of the host's network."""
    zygote, env = await _warmed_zygote_for_tests(tmp_path)
    try:
        assert _inet_sockets(zygote.pid) == set()
        socket_path = zygote_socket(str(zygote.folder / ZYGOTE_LAUNCHER_NAME))
        assert socket_path is not None
        driver = await forked_driver(socket_path, env, 2)
        assert driver is not None
        (forked,) = children(zygote.pid)
        assert _inet_sockets(forked) == set()
        await asyncio.wait_for(driver.communicate(), 30)
    finally:
        zygote.close()


def _inet_sockets(pid: int) -> set[int]:
    """The inodes of the TCP and UDP sockets (IPv4 or IPv6) among ``pid``'s open files."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                held.add(int(target[len("socket:[") : -1]))
    inet = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                inet.add(int(line.split()[9]))
    return held & inet


def _kept_from_children_kib(pid: int) -> int:
    """Resident KiB of ``pid``'s areas that a fork leaves out (``dc`` in smaps)."""
    kept, rss = 0, 0
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("VmFlags:") and "dc" in line.split()[1:]:
            kept += rss
    return kept


def _anonymous_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("RssAnon:")[1].split()[0])


@pytest.mark.asyncio(loop_scope="session")
async def test_the_zygote_does_not_grow_with_the_drivers_it_forks(tmp_path: Path) -> None:
    """What serving a request allocates is collected before the next fork: else each driver is born
    into a fuller young generation than the last, with more memory outside the heap held by it, and
    reaches its own collections sooner (without the collection: 9.8 MiB more after these 150 forks)."""
    folder = tmp_path / "zygote"
    folder.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    zygote = await DriverZygote.start(folder, env, sandboxed=False, fallback="/bin/false")
    assert zygote is not None
    launcher = [str(folder / ZYGOTE_LAUNCHER_NAME), "cli.js", "run-driver"]

    def fork_drivers(count: int) -> None:
        for _ in range(count):
            ended = subprocess.run(launcher, input="", capture_output=True, text=True, timeout=60, env=env)
            assert ended.returncode == 0, ended.stderr  # a forked driver ends with its standard input

    try:
        await asyncio.to_thread(fork_drivers, 5)
        before = _anonymous_kib(zygote.pid)
        await asyncio.to_thread(fork_drivers, 150)
        assert _anonymous_kib(zygote.pid) - before < 1536, _anonymous_kib(zygote.pid) - before
    finally:
        zygote.close()


def _forked_driver(zygote: int, stdin_inode: int) -> int | None:
    """The driver forked from ``zygote``'s image whose standard input is the pipe ``stdin_inode``."""
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{name}/cmdline").read_bytes()
            if b"driver_zygote.js" in command and os.stat(f"/proc/{name}/fd/0").st_ino == stdin_inode:
                if int(name) != zygote:
                    return int(name)
        except OSError:
            continue
    return None


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_a_driver_forked_after_the_zygote_idled_does_not_collect_the_inherited_heap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V8's memory reducer schedules a full collection once a heap has been idle (8 to 30 s); the
    zygote, blocked in its own loop, never runs it, so every driver forked after such a pause would
    run it first, marking the whole inherited heap: about 90 ms of CPU per run, measured as runs per
    minute falling by a fifth in a service that paused between bursts. Its delays are cut to 50 ms
    here, so the pause takes a second; ``--no-memory-reducer`` is what keeps the driver idle."""
    import scenariokit.runner.confinement.driver_zygote as driver_zygote

    soon = ("--memory-reducer-delay-ms=50", "--gc-memory-reducer-start-delay-ms=50")
    flags = (*driver_zygote.ZYGOTE_NODE_FLAGS, *soon)
    monkeypatch.setattr(driver_zygote, "ZYGOTE_NODE_FLAGS", flags)
    folder = tmp_path / "zygote"
    folder.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # warmed up as a pool's is: its full collection after the warm-up is what starts the reducer
    warm_up = warm_up_options({"executable_path": discover_browser().executable}, scratch)
    zygote = await DriverZygote.start(folder, env, sandboxed=False, fallback="/bin/false", warm_up=warm_up)
    assert zygote is not None
    try:
        await asyncio.sleep(1.0)  # idle: the reducer's collection comes due
        launcher = await asyncio.to_thread(
            subprocess.Popen,
            [str(folder / ZYGOTE_LAUNCHER_NAME), "cli.js", "run-driver"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        assert launcher.stdin is not None
        try:
            inode = os.fstat(launcher.stdin.fileno()).st_ino
            driver = None
            for _ in range(100):
                driver = _forked_driver(zygote.pid, inode)
                if driver is not None:
                    break
                await asyncio.sleep(0.05)
            assert driver is not None, "no driver was forked"
            await asyncio.sleep(1.0)  # its loop runs what it inherited that was due
            assert _cpu_ms(driver) < 40, _cpu_ms(driver)
        finally:
            launcher.stdin.close()
            await asyncio.to_thread(launcher.wait, 30)
    finally:
        zygote.close()


#: step code saying whether its Playwright's driver was forked from the zygote, then making HTTP
#: requests from that driver: the API request context, and a route that fetches the real response
FORKED_AND_HTTP = (
    """
import os
mine = set()
for fd in os.listdir('/proc/self/fd'):
    try:
        mine.add(os.stat(f'/proc/self/fd/{fd}').st_ino)
    except OSError:
        pass
forked = False
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        command = open(f'/proc/{pid}/cmdline', 'rb').read()
        if b'driver_zygote.js' in command and os.stat(f'/proc/{pid}/fd/0').st_ino in mine:
            forked = True
    except OSError:
        continue
print('forked', forked)
# the worker asked the zygote itself: no launcher process started for its Playwright (counted among
# the worker's children: without a sandbox, other tests' launchers are in sight too)
launchers = 0
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        parent = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
        command = open(f'/proc/{pid}/cmdline', 'rb').read()
        launchers += parent == os.getpid() and b'node-from-zygote' in command
    except OSError:
        continue
print('launchers', launchers)
"""
    + BROWSER_PROCESSES
    + DEVICES_SENT
    + HTTP_FROM_THE_DRIVER
)


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(
    ("mode", "started"), [("bubblewrap", "zygote"), ("off", "zygote"), ("bubblewrap", "exec")]
)
async def test_workers_get_drivers_forked_from_the_pools_zygote_and_they_speak_http(
    mode: SandboxMode,
    started: str,
    browser_marker: str,
    make_job: Callable[..., RunJob],
    marked_sandbox_with: Callable[..., SandboxConfig],
) -> None:
    """Workers forked or started by exec alike: bubblewrap sets PWD for what it execs, which a forked
    worker has not, and such a worker once presented a list of variables the zygote refused."""
    if mode == "bubblewrap" and not bubblewrap_works():
        pytest.skip("bubblewrap does not work here")
    config = marked_sandbox_with(mode=mode, driver_zygote=True, zygote=started == "zygote")
    async with WorkerPool(1, sandbox=config) as pool:
        made = await pool.node_cache_made()
        skip_if_left_out(pool, "the Playwright driver zygote")
        assert made is not None and made.zygote is not None, "the pool started no driver zygote"
        assert pool.launch is not None and pool.launch.node_cache == made
        for _ in range(pool.size + 2):  # the spares started before the zygote was up
            outcome, events = await run_collecting(pool, make_job(FORKED_AND_HTTP, step_timeout=30.0))
            assert outcome.status == "pass", outcome.error
            assert printed(events, "request ") == ["200 True"]
            assert printed(events, "route ") == ["fetched 200"]
            if printed(events, "forked ") == ["True"]:
                assert printed(events, "launchers ") == ["0"]
                assert browser_runs_its_network_service_inside(events)  # as the zygote's driver launches it
                assert devices_sent(events) == 0  # the worker reads none (driver_devices.js)
                return
    raise AssertionError("no worker's driver was forked from the zygote")


def test_the_launcher_is_run_by_the_workers_interpreter_isolated() -> None:
    from scenariokit.runner.confinement.driver_zygote import launcher_script

    text = launcher_script(sys.executable, "/x/socket", "/x/node")
    assert text.startswith(f"#!{sys.executable} -IS\n")
    assert NODE_PATH_ENV not in text  # it names no other launcher than the fallback it is given


#: a service's process, as far as the zygote is concerned: it starts one, says its pid, and waits
STARTS_A_ZYGOTE = """
import asyncio, sys
from pathlib import Path
from scenariokit.runner.confinement.driver_zygote import DriverZygote
async def main():
    folder = Path(sys.argv[1])
    env = {'PATH': '/usr/bin:/bin', 'HOME': str(folder)}
    zygote = await DriverZygote.start(folder, env, sandboxed=False, fallback='/bin/false')
    print(zygote._process.pid, flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.asyncio(loop_scope="session")
async def test_the_zygote_ends_with_the_process_that_started_it_even_a_killed_one(tmp_path: Path) -> None:
    service = await asyncio.create_subprocess_exec(
        sys.executable, "-c", STARTS_A_ZYGOTE, str(tmp_path),
        stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert service.stdout is not None
    pid = int(await asyncio.wait_for(service.stdout.readline(), 60))
    assert _alive(pid)
    service.kill()
    await service.wait()
    for _ in range(200):
        if not _alive(pid):
            return
        await asyncio.sleep(0.1)
    os.kill(pid, 9)
    raise AssertionError("the driver zygote outlived the process that started it")


@pytest.mark.asyncio(loop_scope="session")
async def test_a_zygote_whose_warm_up_fails_serves_without_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "zygote"
    folder.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    no_browser = {"launch": {"executablePath": str(tmp_path / "no-browser")}, "scratch": str(tmp_path)}
    zygote = await DriverZygote.start(folder, env, sandboxed=False, fallback="/bin/false", warm_up=no_browser)
    assert zygote is not None
    try:
        assert zygote.running and (folder / SOCKET_NAME).is_socket()
        assert "warm-up failed" in caplog.text
    finally:
        zygote.close()


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_the_pools_of_one_process_share_its_zygote_which_outlives_each_pool(
    browser_marker: str,
    make_job: Callable[..., RunJob],
    marked_sandbox_with: Callable[..., SandboxConfig],
) -> None:
    sandbox = marked_sandbox_with(mode="off", driver_zygote=True)
    async with WorkerPool(1, sandbox=sandbox) as first:
        made = await first.node_cache_made()
        assert made is not None and made.zygote is not None
    async with WorkerPool(1, sandbox=sandbox) as second:
        # its first workers started with the zygote the first pool left: the first run's driver is forked
        outcome, events = await run_collecting(second, make_job(FORKED_AND_HTTP, step_timeout=30.0))
        assert outcome.status == "pass", outcome.error
        assert printed(events, "forked ") == ["True"]
        assert printed(events, "launchers ") == ["0"]
        again = await second.node_cache_made()
        assert again is not None and again.zygote == made.zygote


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("mode", ["bubblewrap", "off"])
async def test_once_a_pool_has_its_zygote_every_warm_worker_has_a_driver_the_zygote_forked(
    mode: SandboxMode,
    browser_marker: str,
    marked_sandbox_with: Callable[..., SandboxConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pool's first workers start while it makes its drivers' snapshot and zygote, so they load the
    driver the ordinary way (more memory and CPU a run). Those still warm are replaced once the zygote
    is up, with no run needed: a service's first runs are as its later ones. A later pool of the same
    process starts its first workers with the zygote."""
    if mode == "bubblewrap" and not bubblewrap_works():
        pytest.skip("bubblewrap does not work here")
    from scenariokit.runner.parent import executor

    # this pool makes its own snapshot and zygote, whatever an earlier test of this process made
    monkeypatch.setattr(executor, "_driver_snapshots", {})
    monkeypatch.setattr(executor, "_driver_zygotes", {})
    config = marked_sandbox_with(mode=mode, driver_zygote=True)
    async with WorkerPool(1, sandbox=config) as pool:
        first = set(pool.worker_pids())
        made = await pool.node_cache_made()
        skip_if_left_out(pool, "the Playwright driver zygote")
        assert made is not None and made.zygote is not None, "the pool started no driver zygote"
        (zygote,) = executor._driver_zygotes.values()
        warm = pool.size + executor.WARM_SPARES
        assert len(first) == warm
        forked = await _until(lambda: len(children(zygote.pid)) == warm == pool.ready_workers)
        assert forked, (children(zygote.pid), pool.ready_workers)
        assert not first & set(pool.worker_pids())  # each first worker was replaced, none took a run
    async with WorkerPool(1, sandbox=config) as later:
        assert len(children(zygote.pid)) == len(later.worker_pids()) == warm  # from its start


async def _until(condition: Callable[[], bool], within: float = 30.0) -> bool:
    """Whether ``condition`` holds within ``within`` seconds (asked every 50 ms)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.mark.asyncio(loop_scope="session")
async def test_a_zygote_that_never_says_ready_is_killed_after_its_time(tmp_path: Path) -> None:
    # a warm-up that hangs: neither `ready` nor an exit (before, this waited for the exit forever)
    hanging = [sys.executable, "-c", "import time; time.sleep(60)"]
    starting = asyncio.ensure_future(
        DriverZygote._started(tmp_path, hanging, dict(os.environ), 1.0, warming=True)
    )
    done, _ = await asyncio.wait({starting}, timeout=20)
    if not done:
        starting.cancel()
        raise AssertionError("the start still waits for a zygote that never said ready")
    assert isinstance(starting.exception(), TimeoutError)
    left = await asyncio.to_thread(
        subprocess.run, ["pgrep", "-f", "import time; time.sleep(60)"], capture_output=True, text=True
    )
    assert left.stdout == "", left.stdout  # killed, not left behind
