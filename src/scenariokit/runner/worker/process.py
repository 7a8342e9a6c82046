"""The worker process: its own asyncio loop and Playwright, executing exactly one run.

A worker starts in its own process group, so the pool can stop it and everything it started at once.
It receives :mod:`.protocol` commands over a pipe (read by a thread, so a busy loop never stalls the
pipe) and reports events as they happen. It comes up warm, with Playwright started and its browser
launched, with a context and page open in it for a run that starts from no saved session, and waits
for its one run; the run's limits (:mod:`.sandbox`) are set right before the step
code runs. Nothing a run does to the interpreter can reach another run: after it the worker exits,
unless the run saved its session, whose browser stays open here until released or expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from playwright.async_api import async_playwright

from scenariokit.domain.job import RunEvent, RunFinished, RunJob, SessionReleased
from scenariokit.domain.model import RunError, RunErrorKind, utcnow
from scenariokit.runner.confinement.driver_snapshot import DEVICES_ENV
from scenariokit.runner.confinement.driver_zygote import use_forked_drivers
from scenariokit.runner.confinement.processes import become_subreaper, process_tree
from scenariokit.runner.confinement.sandbox import apply_limits
from scenariokit.runner.protocol import (
    COMMAND_TYPES,
    MAX_COMMAND_BYTES,
    OUTPUT_END,
    AuthoringExec,
    AuthoringLook,
    CancelRun,
    Channel,
    Command,
    ReleaseSession,
    Report,
    RunReport,
    Shutdown,
    StartAuthoring,
    StartRun,
    UnreadableFrame,
    WorkerOptions,
    WorkerReady,
    finished_run,
    mask_event,
)
from scenariokit.runner.worker.authoring import AuthoringLive
from scenariokit.runner.worker.execution import (
    BROWSER_CALL_TIMEOUT_SECONDS,
    HeldSession,
    RunEnd,
    RunExecution,
    close_browser,
)
from scenariokit.runner.worker.plugin_hooks import PluginHooks

logger = logging.getLogger(__name__)

#: how long shutting down waits for each part (runs, sessions, Playwright) before leaving it to the kill
SHUTDOWN_STEP_SECONDS = 5.0


#: How long a worker whose pool is gone may take to close its browsers before it is ended hard.
ORPHAN_GRACE_SECONDS = 5.0

#: How long a worker whose run is over waits for the pool to kill it before it closes its browser itself.
#: The pool kills the worker's whole process tree as soon as it has the outcome (that kill is the run's
#: browser close in its timings), so a graceful close begun meanwhile only spends the CPU the next
#: run starts on; and Chromium, with the network service and the GPU service in its own process
#: (``DEFAULT_ARGS`` and driver_launch_flags.js), ends a graceful close on a CHECK (SIGTRAP) about one
#: time in six on a busy machine. The close after this wait is for a pool that does not come.
POOL_KILL_WAIT_SECONDS = 5.0


def worker_entry(fd: int) -> None:
    """Entry point of a worker process started by the pool: its options come first over the channel."""
    conn = Channel.from_fd(fd)
    try:
        options = conn.receive((WorkerOptions,), MAX_COMMAND_BYTES)
    except (EOFError, OSError, UnreadableFrame) as exc:
        raise SystemExit(
            f"scenariokit worker: expected WorkerOptions from the pool: {type(exc).__name__}: {exc}"
        ) from None
    worker_main(conn, options)


def worker_main(conn: Channel, options: WorkerOptions) -> None:
    """Run the worker on ``conn`` until its run (and any session it saved) is over."""
    if hasattr(os, "setpgrp"):
        os.setpgrp()  # own process group: the pool kills the worker, its driver and browsers together
    become_subreaper()  # a process step code detaches (a session of its own, its parent gone) stays ours
    if hasattr(signal, "pthread_sigmask"):
        # Started with SIGINT blocked (see worker_handle.sigint_blocked): a Ctrl-C meant for the server's
        # process group may be pending. Out of that group now, drop it and take SIGINT as usual again.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.basicConfig(level=logging.WARNING, format="scenariokit worker %(process)d: %(message)s")
    asyncio.run(Worker(conn, options).serve())


async def _start_playwright(*, devices: bool) -> Any:
    """Playwright, with its device list only when ``devices`` (a plugin's browser launcher may read it).

    A worker has no other use for ``playwright.devices``: a run's device comes resolved into its
    context options. Without the list a driver the pool prepared answers the connection with an
    empty one (``driver_devices.js``); a driver started the ordinary way sends it all the same.
    """
    if devices:
        return await async_playwright().start()
    os.environ[DEVICES_ENV] = "none"
    try:
        return await async_playwright().start()
    finally:
        del os.environ[DEVICES_ENV]


class Worker:
    """Serves commands from the pool until its one run is over or the pool goes away."""

    def __init__(self, conn: Channel, options: WorkerOptions) -> None:
        self._conn = conn
        self._options = options
        self._hooks = PluginHooks(None)
        self._playwright: Any = None
        self._runs: dict[uuid.UUID, RunExecution] = {}
        self._held: dict[uuid.UUID, tuple[HeldSession, asyncio.TimerHandle]] = {}
        self._spare: asyncio.Task[Any] | None = None
        #: (browser, context, page) made in the spare browser ahead of the run
        self._warm: tuple[Any, Any, Any] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._inbox: asyncio.Queue[Command] = asyncio.Queue()
        self._took_run = False
        #: the authoring session this worker holds instead of a run, if it was given one
        self._authoring: AuthoringLive | None = None

    async def serve(self) -> None:
        """Start Playwright and the browser, say ready, and handle commands until :class:`Shutdown`."""
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=self._receive, args=(loop, self._inbox), name="pool-pipe", daemon=True
        ).start()
        use_forked_drivers()
        self._hooks = PluginHooks.load()
        self._playwright = await _start_playwright(devices=self._hooks.provides_browsers)
        try:
            self._spare = asyncio.ensure_future(self._launch())
            # warm: the run that comes finds its browser up (a failed launch is retried, and reported, then)
            await asyncio.wait({self._spare})
            await self._prepare_page(self._spare)
            self._send(WorkerReady(pid=os.getpid()))
            while not isinstance(command := await self._inbox.get(), Shutdown):
                self._handle(command)
        finally:
            await self._close_all()

    def _receive(self, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[Command]) -> None:
        """Pipe reader thread: hands each command to the loop; the pool going away means shut down."""
        while True:
            try:
                command: Command = self._conn.receive(COMMAND_TYPES, MAX_COMMAND_BYTES)
            except UnreadableFrame as exc:  # the pool's own frames are all readable: a bug, say so
                logger.warning("unreadable command from the pool: %s", exc)
                continue
            except (EOFError, OSError):
                command = Shutdown()
                threading.Thread(target=self._exit_when_stuck, name="orphan-guard", daemon=True).start()
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(inbox.put_nowait, command)
            if isinstance(command, Shutdown):
                return

    def _exit_when_stuck(self) -> None:
        """The pool is gone: unless the worker has exited within a grace period, end it all from here.

        Nobody is left to receive the outcome, and step code may keep the loop from closing (a CPU
        spin) or the shutdown may wait on a stuck thread; without this a worker whose scheduler was
        killed (SIGKILL) would live on with its browsers. The thread is a daemon: a clean exit ends it.
        """
        time.sleep(ORPHAN_GRACE_SECONDS)
        logger.warning("the pool is gone and the worker has not exited: killing its browsers and exiting")
        for pid in process_tree(os.getpgrp()) - {os.getpid()}:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(1)

    def _send(self, report: Report) -> None:
        try:
            self._conn.send(report)
        except OSError as exc:  # the pool is gone; the pipe reader will see it and shut us down
            logger.warning("cannot report to the pool: %s", exc)
        except (TypeError, ValueError) as exc:  # a value no frame carries: a bug, the run must still end
            logger.warning("cannot report %s to the pool: %s", type(report).__name__, exc)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _handle(self, command: Command) -> None:
        if isinstance(command, StartRun):
            if self._took_run:  # one run per process: nothing of one run may reach another
                logger.warning("a worker executes one run only; run %s ignored", command.job.run_id)
                return
            self._took_run = True
            job = command.job
            execution = RunExecution(
                job,
                open_browser=self._take_browser,
                hooks=self._hooks,
                report=lambda e: self._report(job, e),
                limits=self._options.limits,
                ready_page=self._take_page,
            )
            self._runs[job.run_id] = execution  # now, so a cancel right behind the job finds it
            apply_limits(self._options.limits)
            self._spawn(self._run(execution))
        elif isinstance(command, CancelRun):
            running = self._runs.get(command.run_id)
            if running is not None:
                running.cancel()
        elif isinstance(command, ReleaseSession):
            self._spawn(self._release(command.run_id, "released"))
        elif isinstance(command, StartAuthoring):
            if self._took_run:  # an authoring session is this process's one job, as a run would be
                logger.warning(
                    "a worker holds one run or session only; session %s ignored", command.job.run_id
                )
                return
            self._took_run = True
            self._authoring = AuthoringLive(
                command.job,
                open_browser=self._take_browser,
                ready_page=self._take_page,
                hooks=self._hooks,
                limits=self._options.limits,
                send=self._send,
            )
            apply_limits(self._options.limits)
            self._spawn(self._authoring.start(command.request))
        elif isinstance(command, AuthoringExec | AuthoringLook):
            if self._authoring is not None:
                self._spawn(self._authoring.handle(command))

    # --- the run ---------------------------------------------------------------------------------

    async def _run(self, execution: RunExecution) -> None:
        job = execution.job
        end = RunEnd()
        try:
            end = await execution.execute()
        except Exception as exc:  # a runner bug must still end the run, or the pool waits for nothing
            logger.exception("run %s failed in the runner", job.run_id)
            error = RunError(kind=RunErrorKind.ERROR, message=f"runner error: {type(exc).__name__}: {exc}")
            self._report(job, finished_run(job, [], utcnow(), error))
        finally:
            self._runs.pop(job.run_id, None)
        if end.session is not None:
            self._hold(end.session)
            return
        if end.browser is None:
            self._inbox.put_nowait(Shutdown())
            return
        self._await_kill(end.browser)

    def _await_kill(self, browser: Any) -> None:
        """Leave ``browser`` (its run over and reported) to the pool's kill; close it and exit only when
        that has not come after :data:`POOL_KILL_WAIT_SECONDS`.

        A timer, not a wait in a task: a shutdown meanwhile (the pool closing) need not wait on it.
        """
        asyncio.get_running_loop().call_later(
            POOL_KILL_WAIT_SECONDS, lambda: self._spawn(self._leave(browser))
        )

    async def _leave(self, browser: Any) -> None:
        """Close a finished run's (or released session's) browser and exit: the pool's kill did not come."""
        await close_browser(browser)
        self._inbox.put_nowait(Shutdown())

    def _report(self, job: RunJob, event: RunEvent) -> None:
        if isinstance(event, RunFinished):
            mark_output_end()
        self._send(RunReport(run_id=job.run_id, event=mask_event(event, job.secrets)))

    # --- the browser -----------------------------------------------------------------------------

    async def _launch(self) -> Any:
        config = self._options.browser
        if config.ws_endpoint:
            return await self._playwright.chromium.connect(config.ws_endpoint)
        options = config.launch_options()
        if self._options.files_dir is not None:  # large files on disk, not in a sandbox's /tmp
            options.update(downloads_path=self._options.files_dir, traces_dir=self._options.files_dir)
        return await self._playwright.chromium.launch(**options)

    async def _prepare_page(self, launch: asyncio.Task[Any]) -> None:
        """Open the context and page a run without a saved session starts on, while the worker waits.

        They are made with the options such a run's own would have (none), in the browser the run
        gets; a failure here only means the run makes its own.
        """
        if launch.cancelled() or launch.exception() is not None:
            return
        browser = launch.result()
        try:
            async with asyncio.timeout(BROWSER_CALL_TIMEOUT_SECONDS):
                context = await browser.new_context()
            async with asyncio.timeout(BROWSER_CALL_TIMEOUT_SECONDS):
                page = await context.new_page()
        except Exception as exc:
            logger.warning("no page made ahead: %s: %s", type(exc).__name__, exc)
            return
        self._warm = (browser, context, page)

    async def _take_page(self, job: RunJob, browser: Any) -> tuple[Any, Any] | None:
        """The context and page made ahead, when the run uses that browser and starts with no session."""
        warm, self._warm = self._warm, None
        if warm is None:
            return None
        warm_browser, context, page = warm
        fits = job.storage_state is None and job.default_context
        if warm_browser is browser and fits and not page.is_closed():
            return context, page
        if warm_browser is browser:  # a saved session or browser settings need a context made with them
            self._spawn(_close_context(context))
        return None

    async def _take_browser(self, job: RunJob) -> Any:
        """A browser nobody has used: a plugin's, the one launched at start, or a new launch."""
        launcher = self._hooks.browser_provider(job)
        spare, self._spare = self._spare, None
        if launcher is not None:
            if spare is not None:
                self._spawn(_close_launched(spare))
            return await launcher(self._playwright)
        browser = None
        if spare is not None:
            try:
                browser = await spare
            except Exception as exc:  # the launch at start failed; a launch now says why, if it fails too
                logger.warning("browser failed to start: %s", exc)
        if browser is not None and browser.is_connected():
            return browser
        return await self._launch()

    # --- a saved session -------------------------------------------------------------------------

    def _hold(self, held: HeldSession) -> None:
        loop = asyncio.get_running_loop()
        run_id = held.run_id
        timer = loop.call_later(
            self._options.session_keepalive, lambda: self._spawn(self._release(run_id, "expired"))
        )
        self._held[run_id] = (held, timer)
        held.browser.on("disconnected", lambda _: self._spawn(self._release(run_id, "browser closed")))

    async def _release(self, run_id: uuid.UUID, reason: str) -> None:
        entry = self._held.pop(run_id, None)
        if entry is None:
            return
        held, timer = entry
        timer.cancel()
        if not self._held and not self._runs:  # its one run and its session are over
            self._send(SessionReleased(run_id=run_id, reason=reason))
            self._await_kill(held.browser)  # the pool kills this worker on the report
            return
        await close_browser(held.browser)
        self._send(SessionReleased(run_id=run_id, reason=reason))

    # --- shutdown --------------------------------------------------------------------------------

    async def _close_all(self) -> None:
        for execution in self._runs.values():
            execution.cancel()
        running = [task for task in self._tasks if not task.done()]
        if running:
            await asyncio.wait(running, timeout=SHUTDOWN_STEP_SECONDS)
        if self._authoring is not None:
            await self._authoring.close()
        sessions = list(self._held.values())
        self._held.clear()  # the pool reports these released: closing them here reports nothing more
        for held, timer in sessions:
            timer.cancel()
            await close_browser(held.browser)
        if self._spare is not None:
            spare, self._spare = self._spare, None
            await _close_launched(spare)
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(SHUTDOWN_STEP_SECONDS):
                    await self._playwright.stop()


async def _close_launched(launch: asyncio.Task[Any]) -> None:
    """Close a browser whose launch may still be under way (or may have failed)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(SHUTDOWN_STEP_SECONDS):
            launched = await launch
        await close_browser(launched)


async def _close_context(context: Any) -> None:
    """Close a context made ahead that the run cannot use (the worker's exit is the backstop)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(BROWSER_CALL_TIMEOUT_SECONDS):
            await context.close()


def mark_output_end() -> None:
    """Write :data:`OUTPUT_END` to this process's stdout and stderr, after what Python still buffers:
    the pool forwards every line before it to the run's log before it takes the outcome.

    A stream step code closed or broke gets nothing: the pool then waits a moment, not for ever.
    """
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        with contextlib.suppress(Exception):  # step code may have replaced or closed the stream
            if stream is not None:
                stream.flush()
        with contextlib.suppress(OSError):
            os.write(fd, OUTPUT_END)
