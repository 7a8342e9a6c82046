"""The parent's handle on one worker process: starting it, talking to it, and stopping it for good.

A worker is forked from the pool's zygote (:mod:`.zygote`; under bubblewrap into a sandbox started
here, :func:`.sandbox.sandbox_command`), or started with its own command line
(:func:`.sandbox.worker_command`) where the zygote cannot serve: either way a minimal environment,
its private directory, under bubblewrap when the pool has it, and with its standard output and
error piped back to the pool, so nothing it writes reaches the server's own log. Reports
are read by a thread that blocks on the worker's channel and hands each one to the event loop, so
the loop never blocks on a worker, whatever state that worker is in; they are typed frames
(:class:`.protocol.Channel`), and anything else is logged, naming the worker, and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import typing
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Literal

import attrs

from scenariokit.runner.confinement.cgroups import RunGroup, RunGroups
from scenariokit.runner.confinement.processes import (
    kill_process_tree,
    namespace_inode,
    wait_for_exit,
    wait_readable,
)
from scenariokit.runner.confinement.sandbox import (
    MEMORY_ENV,
    NodeCache,
    ResourceLimits,
    SandboxConfig,
    SandboxKind,
    WorkerCommand,
    WorkerUser,
    drops_user,
    lease_worker_user,
    make_run_dir,
    private_tmp,
    remove_run_dir,
    sandbox_command,
    worker_command,
    worker_plan,
)
from scenariokit.runner.confinement.zygote import FORK_SECONDS, ForkedWorker, Zygote, ZygoteUnavailable
from scenariokit.runner.protocol import (
    MAX_REPORT_BYTES,
    OUTPUT_END,
    REPORT_TYPES,
    Channel,
    Command,
    ForkRequest,
    Report,
    SandboxNamespaces,
    Shutdown,
    UnreadableFrame,
    WorkerOptions,
    WorkerReady,
)
from scenariokit.runner.worker.masking import mask_text

logger = logging.getLogger(__name__)

#: seconds a new worker gets to start Python, Playwright and its browser and say it is ready
READY_TIMEOUT_SECONDS = 60.0
#: a longer line of a worker's output is cut (the rest follows as further lines)
MAX_OUTPUT_LINE = 16 * 1024
#: how much of a worker's output a reader takes at most at once (what has come, up to this)
OUTPUT_CHUNK = 64 * 1024


def output_lines(
    data: bytes, *, final: bool = False, limit: int = MAX_OUTPUT_LINE
) -> tuple[list[bytes], bytes]:
    """The lines of a worker's output in ``data``, each as ``readline(limit)`` returns it (with its
    newline; a longer one cut at ``limit``), and the start of a line still to come; with ``final`` (the
    stream's end) that too is a line, and nothing is left.

    A reader takes what has come in one read and splits it here: read a line at a time, a step's 30,000
    lines were 30,000 reads, each a turn of Python's buffered reader on the reader's thread.
    """
    lines: list[bytes] = []
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", start, start + limit)
        if end >= 0:
            lines.append(data[start : end + 1])
            start = end + 1
        elif size - start >= limit or final:
            lines.append(data[start : start + limit])
            start += len(lines[-1])
        else:
            break
    return lines, data[start:]


Stream = Literal["stdout", "stderr"]


@attrs.frozen
class WorkerGone:
    """The worker's pipe closed: the process exited or was killed."""

    exitcode: int | None

    def describe(self) -> str:
        """``exited with code 3`` / ``exited with code -11 (SIGSEGV)``."""
        if self.exitcode is None:
            return "closed its pipe"
        text = f"exited with code {self.exitcode}"
        if self.exitcode < 0:
            with contextlib.suppress(ValueError):
                text += f" ({signal.Signals(-self.exitcode).name})"
        return text


@attrs.frozen
class WorkerLaunch:
    """How a pool starts its workers: the sandbox it resolved, where run directories go, the options."""

    kind: SandboxKind
    config: SandboxConfig
    pool_dir: Path
    options: WorkerOptions
    #: the pool's folder in memory for its workers' temporary folders (no sandbox; None: on disk)
    memory_dir: Path | None = None
    #: the ``bwrap`` executable found when the pool started (under bubblewrap)
    bwrap: str | None = None
    #: the Playwright driver's compile cache and start-up snapshot the pool made, once it has (read-only
    #: for workers)
    node_cache: NodeCache | None = None
    #: where each worker's control group is made (None: the machine gives none, rlimits alone apply)
    groups: RunGroups | None = None
    #: the pool's fork server, when it has one: workers start from it, by exec when it fails
    zygote: Zygote | None = None


class LoopHandoff:
    """Calls a worker's reader threads hand to the event loop: in the order they came, and all that came
    while the loop was busy in one turn, for one wake-up.

    Each ``call_soon_threadsafe`` wakes the loop through its self-pipe: a step that prints 30,000 lines
    was 30,000 wake-ups. A call that raises is reported as a callback's error is, and the rest run.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._calls: list[tuple[Callable[..., None], tuple[object, ...]]] = []

    def call(self, function: Callable[..., None], *args: object) -> None:
        """Have the loop call ``function(*args)`` after every call handed before it (from any thread).

        Raises RuntimeError when the loop is closed, as ``call_soon_threadsafe`` does.
        """
        with self._lock:
            self._calls.append((function, args))
            if len(self._calls) > 1:  # the loop has a turn coming for them already
                return
        self._loop.call_soon_threadsafe(self._run)

    def _run(self) -> None:
        with self._lock:
            calls, self._calls = self._calls, []
        for function, args in calls:
            try:
                function(*args)
            except Exception as exc:  # as the loop reports a callback's error: the rest still run
                self._loop.call_exception_handler(
                    {"message": f"exception in a worker reader's callback {function!r}", "exception": exc}
                )


class WorkerHandle:
    """One worker process as the pool sees it."""

    def __init__(self, launch: WorkerLaunch) -> None:
        self._launch = launch
        #: the process started: the worker's Python, or bubblewrap (running the worker or its waiter)
        self._process: subprocess.Popen[bytes] | None = None
        #: the worker the zygote forked, if it came to exist that way
        self._forked: ForkedWorker | None = None
        self._conn: Channel | None = None
        self._send_lock = asyncio.Lock()
        self._killed = threading.Lock()
        self._bubblewrap = False
        #: the output streams reader threads read, by id: they close them (see :func:`_close_pipes`)
        self._read_by_threads: set[int] = set()
        #: the output streams read from the worker (an end mark comes on each)
        self.read_streams: frozenset[Stream] = frozenset()
        #: the worker's private directory on this side, and as the worker sees it
        self.run_dir: Path | None = None
        self.inner_dir: str | None = None
        #: set once the worker said it is ready; ``gone`` once its pipe closed
        self.started = False
        self.gone = False
        #: whether it was given its one run
        self.used = False
        #: the run id this worker is executing, if any
        self.current_run: uuid.UUID | None = None
        #: the secrets of its run: its output outside the run is masked with them too
        self.secrets: tuple[str, ...] = ()
        #: run ids whose saved session this worker holds
        self.sessions: set[uuid.UUID] = set()
        #: the user id leased to it (bubblewrap with the service as root), released once it is gone
        self.user: WorkerUser | None = None
        #: its control group: every process of its run is born in it, and dies with it
        self.group: RunGroup | None = None

    @property
    def node_cache(self) -> NodeCache | None:
        """What the pool had prepared for the drivers when it made this worker (its driver starts so)."""
        return self._launch.node_cache

    @property
    def limits(self) -> ResourceLimits:
        """The run's limits."""
        return self._launch.config.limits

    @property
    def uid(self) -> int | None:
        """The user id leased to it; None where it runs as the service's own user."""
        return self.user.uid if self.user is not None else None

    @property
    def ready(self) -> bool:
        """Whether the worker has started and is still alive."""
        return self.started and not self.gone

    @property
    def pid(self) -> int | None:
        """The worker's pid: the process started (bubblewrap's, under the sandbox), or the one the
        zygote forked (on this host); also the process group id its processes are found by."""
        if self._forked is not None:
            return self._forked.pid
        return self._process.pid if self._process is not None else None

    async def start(
        self,
        on_report: Callable[[WorkerHandle, Report | WorkerGone], None],
        on_output: Callable[[WorkerHandle, Stream, str], None],
        on_output_end: Callable[[WorkerHandle, Stream], None] | None = None,
    ) -> None:
        """Start the process and wait until it is ready; raises RuntimeError when it does not get there.

        ``on_output`` gets each line the worker writes to its stdout or stderr; ``on_output_end`` a
        stream's end mark (:data:`~scenariokit.runner.protocol.OUTPUT_END`, or its end of file), after
        every line before it. :attr:`read_streams` names the streams read.
        """
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        launch = self._launch
        preparing = asyncio.ensure_future(asyncio.to_thread(self._prepare))
        try:
            zygote_problem = await asyncio.shield(preparing)
        except BaseException:
            with contextlib.suppress(BaseException):  # cancelled: what it leased is given back all the same
                await preparing
            await asyncio.to_thread(self.kill)  # gives the id back
            raise
        uid = self.uid
        parent_end: socket.socket | None = None
        if launch.zygote is not None:
            try:
                if zygote_problem is not None:
                    raise zygote_problem
                parent_end, outputs = await self._fork(launch.zygote, uid)
            except ZygoteUnavailable as exc:
                logger.warning("worker started by exec: %s", exc)
        if parent_end is None:
            parent_end, outputs = self._exec(uid)
        self._conn = Channel(parent_end)
        assert self.inner_dir is not None  # set by _fork or _exec, whichever started the worker
        self._conn.send(attrs.evolve(launch.options, files_dir=Path(private_tmp(self.inner_dir))))

        def deliver(report: Report | WorkerGone) -> None:
            if isinstance(report, WorkerReady):
                self.started = True
                if not ready.done():
                    ready.set_result(None)
                return
            if isinstance(report, WorkerGone):
                self.gone = True
                if not ready.done():
                    failure = RuntimeError(f"worker process {report.describe()} before it was ready")
                    ready.set_exception(failure)
            on_report(self, report)

        # the reports and the two streams' lines reach the loop in the order they were read
        handoff = LoopHandoff(loop)
        threading.Thread(target=self._read, args=(handoff, deliver), name="worker-pipe", daemon=True).start()
        self._read_by_threads = {id(stream) for stream in outputs}  # theirs to close (see _close_pipes)
        names: tuple[Stream, Stream] = ("stdout", "stderr")
        self.read_streams = frozenset(name for name, stream in zip(names, outputs, strict=True) if stream)
        for name, stream in zip(names, outputs, strict=True):
            threading.Thread(
                target=self._read_output,
                args=(handoff, name, stream, on_output, on_output_end),
                name=f"worker-{name}",
                daemon=True,
            ).start()
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                await ready
        except BaseException as exc:
            self.kill()  # a worker that did not come up must not outlive this call, even when cancelled
            if isinstance(exc, TimeoutError):
                raise RuntimeError(
                    f"worker process did not start within {READY_TIMEOUT_SECONDS:g} s"
                ) from None
            raise

    def _prepare(self) -> ZygoteUnavailable | None:
        """What a start blocks on before any process, on one thread: the lease of a user id, the private
        directory, the control group, and a dead zygote started again. What the zygote's check found
        wrong is returned, for the start to go by exec.

        One hand-off to a thread and back, not one for each: on a server, each return to the event loop
        waits behind the requests it is serving meanwhile (docs/deployment.md, "Runs under API load").
        """
        launch = self._launch
        if drops_user(launch.kind):  # a user of its own: no run shares another's process limit
            self.user = lease_worker_user()
        self.run_dir = make_run_dir(launch.pool_dir, self.uid, launch.memory_dir)
        if launch.groups is not None:
            self.group = launch.groups.create()
        if launch.zygote is not None:
            try:
                launch.zygote.ensure_running()  # before a sandbox is started for nothing
            except ZygoteUnavailable as exc:
                return exc
        return None

    def _exec(self, uid: int | None) -> tuple[socket.socket, tuple[IO[bytes] | None, IO[bytes] | None]]:
        """Start the worker's own Python (under bubblewrap when the pool has it): its pipe and output."""
        launch = self._launch
        assert self.run_dir is not None
        parent_end, child_end = socket.socketpair()
        try:
            command = worker_command(
                launch.kind,
                self.run_dir,
                launch.config,
                launch.options.browser.executable,
                child_end.fileno(),
                launch.bwrap,
                uid,
                launch.node_cache,
            )
            self.inner_dir = command.inner_dir
            # Started from the loop's thread: bubblewrap's --die-with-parent follows the starting thread.
            self._process = subprocess.Popen(
                # born in its control group, so is everything it starts (bubblewrap, driver, browser)
                self._in_group(command.argv),
                env=command.env,
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                process_group=0,  # its own group: a terminal's Ctrl-C never reaches it
                cwd=self.run_dir,
            )
        except BaseException:
            parent_end.close()
            self.kill()
            raise
        finally:
            child_end.close()
        self._bubblewrap = command.bubblewrap
        return parent_end, (self._process.stdout, self._process.stderr)

    async def _fork(
        self, zygote: Zygote, uid: int | None
    ) -> tuple[socket.socket, tuple[IO[bytes] | None, IO[bytes] | None]]:
        """Have the zygote fork the worker (into its own bubblewrap sandbox when the pool has one).

        Raises :class:`ZygoteUnavailable` (having undone what it started) when it cannot.
        """
        launch = self._launch
        assert self.run_dir is not None
        parent_end, child_end = socket.socketpair()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        given = [child_end.fileno(), out_write, err_write]
        info_read: int | None = None
        try:
            if launch.kind == "bubblewrap":
                info_read, info_write = os.pipe()
                try:
                    command = sandbox_command(
                        self.run_dir, launch.config, launch.options.browser.executable, info_write,
                        launch.bwrap, uid, launch.node_cache,
                    )  # fmt: skip
                    # Started from the loop's thread: --die-with-parent follows the starting thread.
                    self._process = subprocess.Popen(  # noqa: ASYNC220 (see the comment above)
                        self._in_group(command.argv),
                        env=command.env,
                        pass_fds=(info_write,),
                        stdin=subprocess.PIPE,  # the waiter's: it waits on it, only we hold it
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        process_group=0,
                        cwd=self.run_dir,
                    )
                except BaseException:
                    os.close(info_read)
                    raise
                finally:
                    os.close(info_write)
                self._bubblewrap = True
            else:
                command = worker_plan("none", self.run_dir, launch.config, None, node_cache=launch.node_cache)
            self.inner_dir = command.inner_dir
            forking = asyncio.ensure_future(
                asyncio.to_thread(self._fork_in, zygote, command, uid, info_read, given)
            )
            try:
                self._forked = await asyncio.shield(forking)
            except asyncio.CancelledError:  # a worker it forked meanwhile is ours to stop all the same
                with contextlib.suppress(Exception):
                    self._forked = await forking
                raise
        except BaseException as exc:
            parent_end.close()
            for fd in (out_read, err_read):
                os.close(fd)
            if not isinstance(exc, Exception):  # cancelled: this worker will not be started at all
                self.kill()
                raise
            await asyncio.to_thread(self._end_attempt)
            if not isinstance(exc, ZygoteUnavailable):
                raise ZygoteUnavailable(f"{type(exc).__name__}: {exc}") from exc  # exec may yet work
            raise
        finally:
            child_end.close()
            for fd in given[1:]:
                os.close(fd)
        return parent_end, (os.fdopen(out_read, "rb"), os.fdopen(err_read, "rb"))

    def _fork_in(
        self, zygote: Zygote, command: WorkerCommand, uid: int | None, info: int | None, given: list[int]
    ) -> ForkedWorker:
        """On a thread: wait for the sandbox (``info``: its bubblewrap's pipe, None without one), then
        have the zygote fork the worker into it. The descriptors it opens for the fork go in ``given``.
        """
        sandbox: SandboxNamespaces | None = None
        if info is not None:
            assert self._process is not None
            pidfd, sandbox = _sandbox_ready(self._process, info)
            given.append(pidfd)
        groups = 0
        if self.group is not None:  # the worker joins it before it runs anything of its own
            for name in self.group.procs_files:
                given.append(os.open(name, os.O_WRONLY | os.O_CLOEXEC))
            groups = len(self.group.procs_files)
        request = ForkRequest(env=command.env, cwd=command.inner_dir, uid=uid, sandbox=sandbox, groups=groups)
        return zygote.fork(request, given)

    def _in_group(self, argv: list[str]) -> list[str]:
        """``argv`` born in this worker's control group, when it has one."""
        return self.group.born_in(argv) if self.group is not None else argv

    def _end_attempt(self) -> None:
        """Undo a fork that did not work out (its sandbox), keeping the lease and the directory."""
        process, self._process = self._process, None
        self._bubblewrap = False
        if process is not None:
            _end_sandbox(process)
            _close_pipes(process, skip=self._read_by_threads)

    def _read(self, handoff: LoopHandoff, deliver: Callable[[Report | WorkerGone], None]) -> None:
        """Pipe reader thread: each report goes to ``deliver`` on the loop, in order."""
        assert self._conn is not None
        while True:
            report: Report | WorkerGone
            try:
                report = self._conn.receive(REPORT_TYPES, MAX_REPORT_BYTES)
            except (EOFError, OSError):
                report = WorkerGone(self._wait_for_exit())
            except UnreadableFrame as exc:  # not ours to act on: say so (never a secret of its run), read on
                why = mask_text(str(exc), self.secrets)
                run = f" (run {self.current_run})" if self.current_run is not None else ""
                logger.warning("unreadable report from worker %s%s: %s", self.pid, run, why)
                continue
            try:
                handoff.call(deliver, report)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                return
            if isinstance(report, WorkerGone):
                return

    def _read_output(
        self,
        handoff: LoopHandoff,
        name: Stream,
        stream: IO[bytes] | None,
        on_output: Callable[[WorkerHandle, Stream, str], None],
        on_output_end: Callable[[WorkerHandle, Stream], None] | None,
    ) -> None:
        """Output reader thread: each line the worker writes goes to the pool (and on to the run log);
        the worker's end mark, and the end of the stream, go to ``on_output_end``, in order with them."""
        if stream is None:
            return
        read = typing.cast(io.BufferedIOBase, stream).read1  # what has come, without waiting for more

        def hand(lines: list[bytes]) -> None:
            for line in lines:
                ended = line.endswith(OUTPUT_END)
                if ended:  # after a line step code left unfinished, or alone
                    line = line[: -len(OUTPUT_END)]
                if line:
                    text = line.decode("utf-8", "replace").rstrip("\n")
                    handoff.call(on_output, self, name, text)
                if ended and on_output_end is not None:
                    handoff.call(on_output_end, self, name)

        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: the loop closed
            left = b""
            while chunk := read(OUTPUT_CHUNK):
                lines, left = output_lines(left + chunk)
                hand(lines)
            hand(output_lines(left, final=True)[0])
            if on_output_end is not None:  # nothing more can come
                handoff.call(on_output_end, self, name)
        with contextlib.suppress(OSError):
            stream.close()

    async def send(self, command: Command) -> bool:
        """Send a command; False when the worker is gone."""
        if self.gone or self._conn is None:
            return False
        async with self._send_lock:
            if self._conn.closed:  # the reader closed it: the worker is gone
                return False
            try:
                await asyncio.to_thread(self._conn.send, command)
            except (OSError, ValueError):  # closed by the reader thread meanwhile
                return False
        return True

    def _wait_for_exit(self) -> int | None:
        """The exit code of a worker whose pipe closed (blocking: the reader thread calls it)."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        if self._forked is not None:
            return self._forked.wait(5.0)
        if self._process is None:
            return None
        try:
            code = self._process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            return None
        if self._bubblewrap and code > 128:  # bubblewrap reports a child's signal n as 128 + n
            return 128 - code
        return code

    async def shutdown(self, grace: float) -> None:
        """Ask the worker to close its browsers and exit; kill whatever is left after ``grace`` seconds."""
        process, forked = self._process, self._forked
        if (process is not None or forked is not None) and await self.send(Shutdown()):
            if forked is not None:
                await asyncio.to_thread(forked.wait, grace)
            elif process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    await asyncio.to_thread(process.wait, grace)
        await asyncio.to_thread(self.kill)

    def kill(self) -> None:
        """Kill the worker and everything it started, and remove its directory. Idempotent; blocking."""
        self.gone = True
        with self._killed:
            process, forked = self._process, self._forked
            if process is not None and not (self._bubblewrap and _end_sandbox(process)):
                kill_process_tree(process.pid)
                wait_for_exit(process, 5.0)
            if forked is not None:
                # under bubblewrap it died with its sandbox's PID namespace (its exit follows at once);
                # without, or when that did not happen, its process group and descendants are found
                # (its pid stays its own until then: the zygote reaps it only once we stop listening)
                if not (self._bubblewrap and forked.wait(5.0) is not None):
                    kill_process_tree(forked.pid)
                    forked.wait(5.0)
                forked.close()
            if self.group is not None:  # whatever escaped the process tree dies with the group
                self.group.remove()
            if process is not None:
                _close_pipes(process, skip=self._read_by_threads)
            if self.run_dir is not None:
                remove_run_dir(self.run_dir)
            if self.user is not None:  # its processes are dead and its files gone: the id is free
                self.user.release()


def group_limit_reached(worker: WorkerHandle) -> str | None:
    """The limit of the worker's control group its run reached, in words (None: none was).

    These are the limits rlimits cannot set: memory over every process of the run, browser and driver
    included, and tasks for a service running as root.
    """
    group = worker.group
    if group is None:
        return None
    limits = worker.limits
    if group.oom_kills():
        return (
            f"the run's memory limit of {limits.memory_mb} MiB ({MEMORY_ENV}) was reached: the kernel "
            "killed one of its processes (the worker, the Playwright driver or the browser)"
        )
    if group.task_limit_hits():
        return f"the run's process limit ({limits.processes} more processes) was reached"
    return None


def _end_sandbox(process: subprocess.Popen[bytes]) -> bool:
    """Kill a bubblewrap worker by its launcher; True once that is done (False: scan for its processes).

    Everything the worker started lives in bubblewrap's PID namespace, whose first process dies with
    the launcher (``--die-with-parent``); when it dies the kernel kills every process in the namespace
    and in any namespace nested in it (Chromium's own sandbox makes some). So the launcher's death is
    the whole tree's, without reading the machine's process table for it.
    """
    # The launcher's whole process group: bubblewrap's inner process (the namespace's first) is in it,
    # and a launcher killed before that one set --die-with-parent would leave it running on its own.
    # Signalled before the launcher is reaped, so the group's id cannot have been reused.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    return wait_for_exit(process, 5.0)


def _close_pipes(process: subprocess.Popen[bytes], *, skip: set[int]) -> None:
    """Close the pipes to ``process``, but those a reader thread reads (ids in ``skip``): they are that
    thread's to close once the pipe ends. Closing a stream another thread is blocked reading waits for
    that read, for ever should anything still hold the pipe's other end."""
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None and id(stream) not in skip:
            with contextlib.suppress(OSError):
                stream.close()


def _readable(fd: int, deadline: float) -> bool:
    """Wait until ``fd`` has something to read (or its end); False once ``deadline`` passed."""
    left = deadline - time.monotonic()
    if left <= 0 or not wait_readable(fd, left):
        raise RuntimeError(f"the sandbox was not set up within {FORK_SECONDS:g} s")
    return True


def _sandbox_ready(process: subprocess.Popen[bytes], info: int) -> tuple[int, SandboxNamespaces]:
    """A pidfd of a new sandbox's first process and its namespaces, once every mount is in place.

    bubblewrap writes its first process's host pid to ``info`` before setting the sandbox up; the
    waiter's first line says the set-up is done. The pidfd pins that very process: it is checked to
    be bubblewrap's child (our child, not yet reaped, so its pid is not reused) while it is known alive.
    """
    deadline = time.monotonic() + FORK_SECONDS
    assert process.stdout is not None
    waiter = process.stdout.fileno()
    try:
        data = b""
        while _readable(info, deadline) and (chunk := os.read(info, 4096)):
            data += chunk
    finally:
        os.close(info)
    if not data:
        raise RuntimeError("bubblewrap did not start a sandbox")
    described = json.loads(data)
    first = int(described["child-pid"])
    if not _readable(waiter, deadline) or os.read(waiter, 64) != b"ready\n":
        raise RuntimeError("the sandbox's waiter did not start")
    pidfd = os.pidfd_open(first)
    try:
        with open(f"/proc/{first}/stat", "rb") as stat:
            parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
        # bubblewrap names the namespaces it made but a user namespace: an ordinary user's has one
        user = namespace_inode("user", first)
        signal.pidfd_send_signal(pidfd, 0)  # still that process: the two reads were its own
        if parent != process.pid:
            raise RuntimeError(f"pid {first} is not the sandbox's first process")
    except BaseException:
        os.close(pidfd)
        raise
    namespaces = SandboxNamespaces(
        **{name: int(described[f"{name}-namespace"]) for name in ("mnt", "pid", "ipc")},
        user=None if user == _own_user_namespace() else user,
    )
    return pidfd, namespaces


@functools.cache
def _own_user_namespace() -> int:
    return namespace_inode("user")
