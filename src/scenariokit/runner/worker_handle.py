"""The parent's handle on one worker process: starting it, talking to it, and stopping it for good.

A worker is started with its own command line (:func:`.sandbox.worker_command`): a minimal
environment, its private directory, under bubblewrap when the pool has it, and with its standard
output and error piped back to the pool, so nothing it writes reaches the server's own log. Reports
are read by a thread that blocks on the pipe and hands each one to the event loop, so the loop never
blocks on a worker, whatever state that worker is in; they are decoded with
:func:`.protocol.decode_report`, never trusted as pickles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import subprocess
import threading
import uuid
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Literal

import attrs

from scenariokit.runner.cgroups import RunGroup, RunGroups
from scenariokit.runner.processes import kill_process_tree
from scenariokit.runner.protocol import (
    MAX_REPORT_BYTES,
    Command,
    Report,
    Shutdown,
    UnreadableReport,
    WorkerReady,
    decode_report,
)
from scenariokit.runner.sandbox import (
    MEMORY_ENV,
    NodeCache,
    ResourceLimits,
    SandboxConfig,
    SandboxKind,
    WorkerUser,
    drops_user,
    lease_worker_user,
    make_run_dir,
    remove_dir,
    worker_command,
)
from scenariokit.runner.worker import WorkerOptions

logger = logging.getLogger(__name__)

#: seconds a new worker gets to start Python, Playwright and its browser and say it is ready
READY_TIMEOUT_SECONDS = 60.0
#: a longer line of a worker's output is cut (the rest follows as further lines)
MAX_OUTPUT_LINE = 16 * 1024

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
    #: the ``bwrap`` executable found when the pool started (under bubblewrap)
    bwrap: str | None = None
    #: the Playwright driver's compile cache and start-up snapshot the pool made, once it has (read-only
    #: for workers)
    node_cache: NodeCache | None = None
    #: where each worker's control group is made (None: the machine gives none, rlimits alone apply)
    groups: RunGroups | None = None


class WorkerHandle:
    """One worker process as the pool sees it."""

    def __init__(self, launch: WorkerLaunch) -> None:
        self._launch = launch
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._send_lock = asyncio.Lock()
        self._killed = threading.Lock()
        self._bubblewrap = False
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
    def limits(self) -> ResourceLimits:
        """The run's limits."""
        return self._launch.config.limits

    @property
    def ready(self) -> bool:
        """Whether the worker has started and is still alive."""
        return self.started and not self.gone

    @property
    def pid(self) -> int | None:
        """The pid of the process started (bubblewrap's, under the sandbox), also its process group id."""
        return self._process.pid if self._process is not None else None

    async def start(
        self,
        on_report: Callable[[WorkerHandle, Report | WorkerGone], None],
        on_output: Callable[[WorkerHandle, Stream, str], None],
    ) -> None:
        """Start the process and wait until it is ready; raises RuntimeError when it does not get there."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        launch = self._launch
        try:
            if drops_user(launch.kind):  # a user of its own: no run shares another's process limit
                self.user = await asyncio.to_thread(lease_worker_user)
            uid = self.user.uid if self.user is not None else None
            self.run_dir = await asyncio.to_thread(make_run_dir, launch.pool_dir, uid)
            if launch.groups is not None:
                self.group = await asyncio.to_thread(launch.groups.create)
        except BaseException:
            await asyncio.to_thread(self.kill)  # gives the id back
            raise
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
            self._process = subprocess.Popen(  # noqa: ASYNC220 (see the comment above)
                command.argv,
                env=command.env,
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                process_group=0,  # its own group: a terminal's Ctrl-C never reaches it
                cwd=self.run_dir,
                # born in its control group, so is everything it starts (bubblewrap, driver, browser)
                preexec_fn=self.group.join if self.group is not None else None,
            )
        except BaseException:
            parent_end.close()
            self.kill()
            raise
        finally:
            child_end.close()
        self._bubblewrap = command.bubblewrap
        self._conn = Connection(parent_end.detach())
        self._conn.send(launch.options)

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

        threading.Thread(target=self._read, args=(loop, deliver), name="worker-pipe", daemon=True).start()
        for name, stream in (("stdout", self._process.stdout), ("stderr", self._process.stderr)):
            threading.Thread(
                target=self._read_output,
                args=(loop, name, stream, on_output),
                name=f"worker-{name}",
                daemon=True,
            ).start()
        try:
            await asyncio.wait_for(ready, READY_TIMEOUT_SECONDS)
        except BaseException as exc:
            self.kill()  # a worker that did not come up must not outlive this call, even when cancelled
            if isinstance(exc, TimeoutError):
                raise RuntimeError(
                    f"worker process did not start within {READY_TIMEOUT_SECONDS:g} s"
                ) from None
            raise

    def _read(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Report | WorkerGone], None]) -> None:
        """Pipe reader thread."""
        assert self._conn is not None
        while True:
            report: Report | WorkerGone
            try:
                report = decode_report(self._conn.recv_bytes(MAX_REPORT_BYTES))
            except (EOFError, OSError):
                report = WorkerGone(self._wait_for_exit())
            except UnreadableReport as exc:  # not ours to act on: say so, keep reading
                logger.warning("unreadable report from worker %s: %s", self.pid, exc)
                continue
            try:
                loop.call_soon_threadsafe(deliver, report)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                return
            if isinstance(report, WorkerGone):
                return

    def _read_output(
        self,
        loop: asyncio.AbstractEventLoop,
        name: Stream,
        stream: IO[bytes] | None,
        on_output: Callable[[WorkerHandle, Stream, str], None],
    ) -> None:
        """Output reader thread: each line the worker writes goes to the pool (and on to the run log)."""
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while line := stream.readline(MAX_OUTPUT_LINE):
                text = line.decode("utf-8", "replace").rstrip("\n")
                try:
                    loop.call_soon_threadsafe(on_output, self, name, text)
                except RuntimeError:
                    break
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
            except (OSError, TypeError):  # TypeError: closed by the reader thread meanwhile
                return False
        return True

    def _wait_for_exit(self) -> int | None:
        """The exit code of a worker whose pipe closed (blocking: the reader thread calls it)."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
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
        process = self._process
        if process is not None and await self.send(Shutdown()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(process.wait, grace)
        await asyncio.to_thread(self.kill)

    def kill(self) -> None:
        """Kill the worker and everything it started, and remove its directory. Idempotent; blocking."""
        self.gone = True
        with self._killed:
            process = self._process
            if process is not None and not (self._bubblewrap and _end_sandbox(process)):
                kill_process_tree(process.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5.0)
            if self.group is not None:  # whatever escaped the process tree dies with the group
                self.group.remove()
            if self.run_dir is not None:
                remove_dir(self.run_dir)
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
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    try:
        process.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        return False
    return True
