"""The driver zygote: a Node with Playwright's driver loaded and warmed up, forking each run's driver.

A one-run worker's Playwright starts its own driver (``node cli.js run-driver``); started from the
start-up snapshot that still costs about 200 ms of CPU per run. Unless ``SCENARIOKIT_DRIVER_ZYGOTE``
is off, and where the Node has ``node:ffi`` (26.1 and later), the service's process also starts
``driver_zygote.js`` (one per worker environment, serving every pool that has it): a Node that
loads (and compiles) the driver once, warms it up, and forks a driver per request. Each run still
gets a driver process of its own (docs/CONTRACT §11: no driver is shared between runs); it costs a
fork instead of a start.

The worker's ``PLAYWRIGHT_NODEJS_PATH`` is then :func:`launcher_script`: a Python client that hands its
standard input, output and error to the zygote and waits for the driver to end. A worker's own
Playwright does not start it: :func:`use_forked_drivers` has the worker ask the zygote itself, with
the same request and its environment (:func:`forked_driver`), and the launcher serves the rest (a
plugin's own Playwright, the authoring host, a refusal). The zygote takes everything else from the
kernel's facts about the requester (its namespaces, control groups, user, limits, working
directory), never from the request, so a driver lands exactly where one the requester started
would be. When the zygote refuses or is gone, the driver is started the ordinary way (the snapshot
launcher).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scenariokit.runner.confinement.driver_snapshot import NODE_PATH_ENV, WARM_UP_FAILED, bundled_driver

logger = logging.getLogger(__name__)

#: the zygote's script, shipped beside this module
ZYGOTE_SCRIPT = Path(__file__).with_name("driver_zygote.js")
DRIVER_ZYGOTE_ENV = "SCENARIOKIT_DRIVER_ZYGOTE"
SOCKET_NAME = "socket"
ZYGOTE_LAUNCHER_NAME = "node-from-zygote"
#: where a sandboxed worker finds the zygote's folder (bound read-only)
SANDBOX_DRIVER_ZYGOTE = "/tmp/scenariokit-driver-zygote"
#: The zygote's V8 runs with no background tasks and Node's platform with one worker thread (a forked
#: child has none of them: see ``untilOthersAsleep`` in the script), and it compiles every function
#: while loading, so forked drivers find their bytecode and baseline code made instead of compiling
#: it again in each run. Its old space starts large: a forked driver then ends its run before its
#: first full collection, which would mark the whole inherited heap (measured: 95 ms per run over
#: 40 runs, against 110 ms rising to 220 ms once the zygote's own garbage brought its children near
#: the default limit). No memory reducer: the full collection it schedules once a heap has been idle
#: (8 to 30 s) never runs in the zygote, whose loop blocks, and would run first in every driver forked
#: after such a pause (measured: 440 rising to 520-570 ms of machine CPU per run).
ZYGOTE_NODE_FLAGS = (
    "--single-threaded",
    "--v8-pool-size=1",
    "--initial-old-space-size=256",
    "--no-memory-reducer",
    "--no-lazy",
    "--no-flush-bytecode",
    "--always-sparkplug",
    "--disable-warning=ExperimentalWarning",
)
#: how long a launcher waits for the zygote's answer before it starts the driver the ordinary way
ANSWER_SECONDS = 5
#: the first Node whose ``node:ffi`` is there without a flag
MINIMUM_NODE = (26, 1)
_FFI_PROBE = (
    "const f=require('node:ffi');"
    "const {functions:c}=f.dlopen(null,{fork:{arguments:[],return:'int32'},"
    "uv_loop_fork:{arguments:['pointer'],return:'int32'},madvise:{arguments:['uint64','uint64','int32'],return:'int32'}});"
    "process.stdout.write(typeof f.getCurrentEventLoop==='function'&&typeof c.fork==='function'?'yes':'no')"
)


def zygote_supported(node: Path) -> bool:
    """Whether ``node`` can be a driver zygote: 26.1 or later, with ``node:ffi`` reaching libc and libuv."""
    try:
        version = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=10, env={})
        major, minor = (int(part) for part in version.stdout.strip().lstrip("v").split(".")[:2])
        if (major, minor) < MINIMUM_NODE:
            return False
        probe = subprocess.run(
            [str(node), "--disable-warning=ExperimentalWarning", "-e", _FFI_PROBE],
            capture_output=True,
            text=True,
            timeout=10,
            env={},
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0 and probe.stdout == "yes"


def zygote_command(
    node: Path,
    package: Path,
    socket_path: Path,
    *,
    sandboxed: bool,
    warm_up: Mapping[str, object] | None = None,
    user_depth: int | None = None,
) -> list[str]:
    """The zygote's argv; it prints ``ready`` once it listens on ``socket_path``.

    ``user_depth``: the sandboxes are an ordinary user's, their processes that many user namespaces
    below the zygote's (:func:`.sandbox.sandbox_user_depth`); it enters them through a go-between.

    With ``warm_up`` (:func:`.driver_snapshot.warm_up_options`) it first launches that browser and
    works a page, as the snapshot's build does; a failed warm-up exits with
    :data:`.driver_snapshot.WARM_UP_FAILED` before ``ready``.
    """
    mode = "sandboxed" if sandboxed else "unsandboxed"
    if sandboxed and user_depth is not None:
        mode = f"{mode}:{user_depth}"
    argv = [str(node), *ZYGOTE_NODE_FLAGS, str(ZYGOTE_SCRIPT), str(package), str(socket_path), mode]
    if warm_up is not None:
        argv.append(json.dumps(warm_up))
    return argv


def launcher_script(python: str, socket_path: str, fallback: str) -> str:
    """The worker's ``PLAYWRIGHT_NODEJS_PATH`` when a zygote runs: ask it, else exec ``fallback``.

    ``python`` runs isolated and without ``site``, and the client imports only modules built into
    the interpreter (``_socket``, ``posix``): about 8 ms of CPU, where ``json``, ``socket`` and ``os``
    alone cost 20 ms more per run. It keeps its standard streams until the zygote says ``started``,
    so a refusal costs nothing but the ordinary start; arguments other than ``run-driver`` go to the
    ordinary start too (the zygote serves nothing else).
    """
    return f"""#!{python} -IS
import _socket, posix, sys
started = False
if sys.argv[2:] == ["run-driver"]:
    try:
        zygote = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        zygote.settimeout({ANSWER_SECONDS})  # a zygote held up by others: start the driver the ordinary way
        zygote.connect({socket_path!r})
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        zygote.sendmsg([b'["run-driver"]'], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        started = zygote.recv(8) == b"started\\n"
        zygote.settimeout(None)
    except OSError:
        pass
if not started:
    posix.execv({fallback!r}, [{fallback!r}, *sys.argv[1:]])
posix.close(0)
posix.close(1)
while zygote.recv(64):  # the driver's end of the connection closes when it exits
    pass
"""


def zygote_socket(node_path: str | None) -> str | None:
    """The socket of the zygote whose launcher ``node_path`` (a ``PLAYWRIGHT_NODEJS_PATH``) is, if any."""
    if not node_path:
        return None
    launcher = Path(node_path)
    return str(launcher.with_name(SOCKET_NAME)) if launcher.name == ZYGOTE_LAUNCHER_NAME else None


class ForkedDriver:
    """A driver the zygote forked for this process, as Playwright's pipe transport uses a driver's process.

    Its standard input and output are pipes of this process; it holds its end of the connection to
    the zygote until it exits, which is how its end is seen (it is not this process's child).
    """

    def __init__(
        self, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader, connection: socket.socket
    ) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self._connection = connection

    async def communicate(self) -> tuple[None, None]:
        """Close its input, read what is left of its output and wait until it has exited."""
        self.stdin.close()
        loop = asyncio.get_running_loop()

        async def drained() -> None:
            while await self.stdout.read(65536):
                pass

        async def ended() -> None:
            while await loop.sock_recv(self._connection, 64):
                pass

        try:
            await asyncio.gather(drained(), ended())
        finally:
            self._connection.close()
        return None, None


async def forked_driver(socket_path: str, env: Mapping[str, str], stderr: int) -> ForkedDriver | None:
    """A driver forked for this process by the zygote at ``socket_path``, with ``env``; None if it says no.

    The request is the launcher's, with the environment in it: a forked worker's environment in
    ``/proc`` is the one its zygote was started with, not the run's. Saves the launcher's start
    (its interpreter, a fork and an exec) in every run.
    """
    loop = asyncio.get_running_loop()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.setblocking(False)
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    request = json.dumps({"argv": ["run-driver"], "env": [f"{name}={value}" for name, value in env.items()]})
    answer = b""
    try:
        try:
            async with asyncio.timeout(ANSWER_SECONDS):
                await loop.sock_connect(connection, socket_path)
                fds = array.array("i", (stdin_read, stdout_write, stderr))
                data = request.encode()
                sent = connection.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                await loop.sock_sendall(connection, data[sent:])
                while len(answer) < 8 and (chunk := await loop.sock_recv(connection, 8 - len(answer))):
                    answer += chunk
        finally:  # the driver has its own copies of them, or there is no driver
            os.close(stdin_read)
            os.close(stdout_write)
    except (OSError, TimeoutError):
        answer = b""
    if answer != b"started\n":
        connection.close()
        os.close(stdin_write)
        os.close(stdout_read)
        return None
    reader = asyncio.StreamReader(limit=32768, loop=loop)
    output = os.fdopen(stdout_read, "rb", 0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), output)
    pipe = os.fdopen(stdin_write, "wb", 0)
    transport, protocol = await loop.connect_write_pipe(lambda: asyncio.streams.FlowControlMixin(loop), pipe)
    return ForkedDriver(asyncio.StreamWriter(transport, protocol, None, loop), reader, connection)


def use_forked_drivers() -> bool:
    """Have this process's Playwright ask the driver zygote for its driver itself, not through the launcher.

    Only when ``PLAYWRIGHT_NODEJS_PATH`` names a zygote's launcher, and only for a Playwright whose
    client builds its pipe transport as the one this was written for (``out_of_process``); any other
    starts the launcher as before. A driver the zygote refuses is started through the launcher too
    (which asks once more, then starts it the ordinary way). Returns whether it is in place.
    """
    found = zygote_socket(os.environ.get(NODE_PATH_ENV))
    if found is None:
        return False
    socket_path: str = found
    try:
        from playwright._impl import out_of_process, transport
        from playwright._impl._driver import get_driver_env
    except ImportError:
        return False
    pipe_transport: Any = transport.PipeTransport
    if getattr(out_of_process, "PipeTransport", None) is not pipe_transport:
        return False
    stderr_fileno = getattr(transport, "_get_stderr_fileno", lambda: None)

    class ZygoteTransport(pipe_transport):
        async def connect(self) -> None:
            stderr = stderr_fileno()  # as Playwright's own transport finds it, when it connects
            driver = await forked_driver(socket_path, get_driver_env(), 2 if stderr is None else stderr)
            if driver is None:
                await super().connect()
                return
            self._stopped_future = asyncio.get_running_loop().create_future()
            self._proc = driver
            self._output = driver.stdin

    out_of_process.PipeTransport = ZygoteTransport  # type: ignore[misc]
    return True


class DriverZygote:
    """A running driver zygote: the folder workers find it in, and its process.

    It is a plain child process, not tied to the event loop that started it: one zygote serves the
    pools of every loop of the service's process (:mod:`.executor`). Its standard input is a pipe
    whose other end only this object holds: the zygote exits when that closes, so it never outlives
    the service's process, even one that was killed.
    """

    def __init__(self, folder: Path, process: subprocess.Popen[bytes]) -> None:
        self.folder = folder
        self._process = process

    @property
    def pid(self) -> int:
        """The zygote's process id."""
        return self._process.pid

    @classmethod
    async def start(
        cls,
        folder: Path,
        env: dict[str, str],
        *,
        sandboxed: bool,
        fallback: str,
        warm_up: Mapping[str, object] | None = None,
        ready_seconds: float = 60.0,
        user_depth: int | None = None,
    ) -> DriverZygote | None:
        """Start a zygote in ``folder`` (its socket and launcher go there) with a worker's ``env``.

        ``fallback`` is the executable the launcher starts the driver with when the zygote says no,
        as the worker sees it. ``warm_up`` is what the zygote warms its driver up with before it
        serves (see :func:`zygote_command`); when that fails it is logged and the zygote is started
        again without. ``user_depth`` as :func:`zygote_command` says. None when this Node cannot be
        a zygote.
        """
        found = bundled_driver()
        if found is None or not await asyncio.to_thread(zygote_supported, found[0]):
            return None
        node, package = found
        inner = SANDBOX_DRIVER_ZYGOTE if sandboxed else str(folder)
        command = functools.partial(
            zygote_command, node, package, folder / SOCKET_NAME, sandboxed=sandboxed, user_depth=user_depth
        )
        argv = command(warm_up=warm_up)
        zygote = await cls._started(folder, argv, env, ready_seconds, warming=warm_up is not None)
        if zygote is None:
            logger.warning("the Playwright driver zygote's warm-up failed: it serves without one")
            argv = command()
            zygote = await cls._started(folder, argv, env, ready_seconds, warming=False)
            assert zygote is not None
        try:
            launcher = folder / ZYGOTE_LAUNCHER_NAME
            text = launcher_script(sys.executable, f"{inner}/{SOCKET_NAME}", fallback)
            await asyncio.to_thread(launcher.write_text, text)
            await asyncio.to_thread(launcher.chmod, 0o555)
            await asyncio.to_thread(folder.chmod, 0o755)
        except BaseException:
            zygote.close()
            raise
        return zygote

    @classmethod
    async def _started(
        cls, folder: Path, argv: list[str], env: dict[str, str], ready_seconds: float, *, warming: bool
    ) -> DriverZygote | None:
        """The zygote started with ``argv``, once it said ready; None if its warm-up (``warming``) failed."""
        process = await asyncio.to_thread(
            subprocess.Popen, argv, env=env, cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        zygote = cls(folder, process)
        try:
            assert process.stdout is not None
            # a zygote that never says ready (a warm-up that hangs, say) is killed below, which also
            # ends the read left waiting in its thread
            async with asyncio.timeout(ready_seconds):
                line = await asyncio.to_thread(process.stdout.readline)
            if line == b"ready\n":
                process.stdout.close()  # it writes nothing more
                return zygote
            if warming and line == b"" and await asyncio.to_thread(process.wait) == WARM_UP_FAILED:
                return None
            raise RuntimeError(f"the driver zygote said {line!r} (exit {process.poll()})")
        except BaseException:
            zygote.close()
            raise

    @property
    def running(self) -> bool:
        """Whether the zygote's process is still there."""
        return self._process.poll() is None

    def close(self) -> None:
        """Stop the zygote (drivers it forked live on with their runs; their groups end them)."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
