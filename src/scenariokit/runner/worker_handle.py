"""The parent's handle on one worker process: starting it, talking to it, and stopping it for good.

Reports are read by a thread that blocks on the pipe and hands each one to the event loop, so the
loop never blocks on a worker, whatever state that worker is in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing.process
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from multiprocessing import resource_tracker
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import attrs

from scenariokit.runner.processes import kill_process_tree
from scenariokit.runner.protocol import Command, Report, Shutdown, WorkerReady
from scenariokit.runner.worker import WorkerOptions, worker_main

logger = logging.getLogger(__name__)

#: seconds a new worker gets to start Python, Playwright and say it is ready
READY_TIMEOUT_SECONDS = 60.0


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


class WorkerHandle:
    """One worker process as the pool sees it."""

    def __init__(self, mp_context: SpawnContext, options: WorkerOptions) -> None:
        self._mp = mp_context
        self._options = options
        self._process: SpawnProcess | None = None
        self._conn: Any = None
        self._send_lock = asyncio.Lock()
        #: set once the worker said it is ready; ``gone`` once its pipe closed
        self.started = False
        self.gone = False
        #: the run id this worker is executing, if any
        self.current_run: uuid.UUID | None = None
        #: run ids whose saved session this worker holds
        self.sessions: set[uuid.UUID] = set()

    @property
    def ready(self) -> bool:
        """Whether the worker has started and is still alive."""
        return self.started and not self.gone

    @property
    def pid(self) -> int | None:
        """The worker's pid, which is also its process group id."""
        return self._process.pid if self._process is not None else None

    async def start(self, on_report: Callable[[WorkerHandle, Report | WorkerGone], None]) -> None:
        """Start the process and wait until it is ready; raises RuntimeError when it does not get there."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        parent_conn, child_conn = self._mp.Pipe(duplex=True)
        self._conn = parent_conn
        process = self._mp.Process(
            target=worker_main, args=(child_conn, self._options), name="scenariokit-worker", daemon=True
        )
        self._process = process
        starting = asyncio.ensure_future(asyncio.to_thread(_start_without_main, process))
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            await starting  # let the start finish, so the kill finds the process
            self.kill()
            raise
        child_conn.close()  # only the child holds its end now: its death closes the pipe for us

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
        while True:
            report: Report | WorkerGone
            try:
                report = self._conn.recv()
            except (EOFError, OSError):
                report = WorkerGone(self._wait_for_exit())
            except Exception:  # a report that cannot be unpickled: say so, keep reading
                logger.exception("unreadable report from worker %s", self.pid)
                continue
            try:
                loop.call_soon_threadsafe(deliver, report)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                return
            if isinstance(report, WorkerGone):
                return

    async def send(self, command: Command) -> bool:
        """Send a command; False when the worker is gone."""
        if self.gone:
            return False
        async with self._send_lock:
            try:
                await asyncio.to_thread(self._conn.send, command)
            except OSError:
                return False
        return True

    def _wait_for_exit(self) -> int | None:
        """The exit code of a worker whose pipe closed (blocking: the reader thread calls it)."""
        with contextlib.suppress(OSError):
            self._conn.close()
        if self._process is None:
            return None
        self._process.join(timeout=5.0)
        return self._process.exitcode

    async def shutdown(self, grace: float) -> None:
        """Ask the worker to close its browsers and exit; kill whatever is left after ``grace`` seconds."""
        process = self._started_process()
        if process is not None and await self.send(Shutdown()):
            await asyncio.to_thread(process.join, grace)
        await asyncio.to_thread(self.kill)

    def _started_process(self) -> SpawnProcess | None:
        """The process, once started (a start interrupted by a signal may leave it unstarted)."""
        return self._process if self._process is not None and self._process.pid is not None else None

    def kill(self) -> None:
        """Kill the worker, its Playwright driver and every browser it started. Idempotent; blocking."""
        self.gone = True
        process = self._started_process()
        if process is None or process.pid is None:
            return
        kill_process_tree(process.pid)
        process.join(timeout=5.0)


_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread, so a process started here begins life with SIGINT blocked.

    The mask survives fork and exec. A terminal's Ctrl-C reaches the whole process group, and a worker
    still importing Python would die of it with a traceback of its own before it can leave the group;
    blocked, the signal waits until :func:`~scenariokit.runner.worker.worker_main` has left the group
    and drops it. (``multiprocessing.resource_tracker`` starts its process the same way.)
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    # Starting the resource tracker unblocks SIGINT in the calling thread when it is done: start it first.
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _start_without_main(process: multiprocessing.process.BaseProcess) -> None:
    """Start a spawned worker without making it import the caller's ``__main__`` module.

    ``spawn`` re-imports the main script in the child so that targets defined there can be found.
    A worker needs nothing from it (its target lives in :mod:`scenariokit.runner.worker`), and
    re-importing a user's script without an ``if __name__ == "__main__":`` guard would run the
    script again in every worker. Hiding the main module's file and spec while the child's
    preparation data is taken prevents that.
    """
    main = sys.modules.get("__main__")
    with _MAIN_LOCK:
        saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
        try:
            for name in saved:
                setattr(main, name, None) if name == "__spec__" else delattr(main, name)
            with sigint_blocked():
                process.start()
        finally:
            for name, value in saved.items():
                setattr(main, name, value)
