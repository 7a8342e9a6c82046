"""The parent side of execution: a pool of worker processes, each running one job at a time.

The pool bounds concurrency (one run per worker), forwards each run's events as they arrive, and
enforces the time limits itself, so even step code that never yields (``while True: pass``) is
stopped: the worker's whole process tree is killed, the run fails with kind ``timeout``, and a new
worker takes its place. A worker that dies (``os._exit``, a segfault) fails its run the same way,
with kind ``error``. Workers are started with ``spawn``: forking a process that runs asyncio and
Playwright is unsafe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import uuid
from collections.abc import Awaitable, Callable

import attrs

from scenariokit.domain.model import RunErrorKind, utcnow
from scenariokit.runner.browser import BrowserConfig, discover_browser
from scenariokit.runner.job import (
    BrowserClosed,
    LogEvent,
    RunEvent,
    RunFinished,
    RunJob,
    SessionReleased,
    SessionSaved,
)
from scenariokit.runner.protocol import (
    CancelRun,
    ReleaseSession,
    Report,
    RunReport,
    StartRun,
    failed_run,
    finished_run,
    mask_event,
    step_label,
    syntax_failure,
)
from scenariokit.runner.run_watch import RunWatch
from scenariokit.runner.stepcode import check_syntax
from scenariokit.runner.worker import WorkerOptions
from scenariokit.runner.worker_handle import WorkerGone, WorkerHandle

logger = logging.getLogger(__name__)

EventCallback = Callable[[RunEvent], Awaitable[None]]
SessionCallback = Callable[[SessionReleased], Awaitable[None]]
ClosedCallback = Callable[[BrowserClosed], Awaitable[None]]

#: seconds a worker gets to close its browsers on shutdown before it is killed
SHUTDOWN_GRACE_SECONDS = 5.0
#: seconds a released session's worker gets to confirm the browser is closed
RELEASE_WAIT_SECONDS = 10.0
#: seconds before a failed replacement worker is started again
RESPAWN_DELAY_SECONDS = 1.0


@attrs.define
class _ActiveRun:
    job: RunJob
    inbox: asyncio.Queue[RunEvent | WorkerGone | None] = attrs.field(factory=asyncio.Queue)
    cancelled: asyncio.Event = attrs.field(factory=asyncio.Event)
    worker: WorkerHandle | None = None


class WorkerPool:
    """Runs jobs in worker processes, at most ``size`` at a time."""

    def __init__(
        self,
        size: int | None = None,
        *,
        browser: BrowserConfig | None = None,
        session_keepalive: float = 600.0,
        on_session_released: SessionCallback | None = None,
        on_browser_closed: ClosedCallback | None = None,
    ) -> None:
        self.size = max(1, size if size is not None else (os.cpu_count() or 1))
        self._browser = browser
        self._session_keepalive = session_keepalive
        self._on_session_released = on_session_released
        self._on_browser_closed = on_browser_closed
        self._mp = multiprocessing.get_context("spawn")
        self._workers: set[WorkerHandle] = set()
        self._idle: asyncio.Queue[WorkerHandle] | None = None
        self._active: dict[uuid.UUID, _ActiveRun] = {}
        self._session_owner: dict[uuid.UUID, WorkerHandle] = {}
        self._releases: dict[uuid.UUID, asyncio.Future[None]] = {}
        self._replacements: set[asyncio.Task[None]] = set()
        #: on_session_released calls under way
        self._callbacks: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Find the browser (BrowserUnavailable if none) and start every worker."""
        if self._idle is not None:
            raise RuntimeError("the pool is already started")
        browser = self._browser or discover_browser()
        self._options = WorkerOptions(browser=browser, session_keepalive=self._session_keepalive)
        self._idle = asyncio.Queue()
        started = await asyncio.gather(
            *(self._start_worker() for _ in range(self.size)), return_exceptions=True
        )
        failures = [result for result in started if isinstance(result, BaseException)]
        if failures:
            await self.close()
            raise failures[0]

    async def close(self) -> None:
        """Stop every worker and every browser it started; held sessions are reported released."""
        self._closed = True
        for task in list(self._replacements):
            task.cancel()
        workers = list(self._workers)
        self._workers.clear()
        await asyncio.gather(*(worker.shutdown(SHUTDOWN_GRACE_SECONDS) for worker in workers))
        for run_id in list(self._session_owner):
            await self._session_closed(SessionReleased(run_id=run_id, reason="worker stopped"))
        if self._callbacks:
            await asyncio.gather(*self._callbacks, return_exceptions=True)

    async def __aenter__(self) -> WorkerPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def ready_workers(self) -> int:
        """How many workers are started and alive (fewer than ``size`` while one is being replaced)."""
        return sum(1 for worker in self._workers if worker.ready)

    def worker_pids(self) -> list[int]:
        """The pids (and process group ids) of the live workers."""
        return [worker.pid for worker in self._workers if worker.pid is not None and worker.ready]

    async def _start_worker(self) -> None:
        worker = WorkerHandle(self._mp, self._options)
        self._workers.add(worker)
        try:
            await worker.start(self._route)
        except BaseException:
            self._workers.discard(worker)
            raise
        assert self._idle is not None
        self._idle.put_nowait(worker)

    def _replace(self, worker: WorkerHandle) -> None:
        """Take a worker that cannot go on out of service (once) and start another in its place."""
        if worker not in self._workers:
            return
        self._workers.discard(worker)
        if self._closed:
            return
        task = asyncio.ensure_future(self._start_replacement(worker))
        self._replacements.add(task)
        task.add_done_callback(self._replacements.discard)

    async def _start_replacement(self, old: WorkerHandle) -> None:
        await asyncio.to_thread(old.kill)
        for run_id in list(old.sessions):
            await self._session_closed(SessionReleased(run_id=run_id, reason="worker stopped"))
        while not self._closed:
            try:
                await self._start_worker()
                return
            except Exception:
                logger.exception("could not start a replacement worker; retrying")
                await asyncio.sleep(RESPAWN_DELAY_SECONDS)

    # --- reports from workers --------------------------------------------------------------------

    def _route(self, worker: WorkerHandle, report: Report | WorkerGone) -> None:
        """Called on the loop for every report a worker sends."""
        if isinstance(report, RunReport):
            run = self._active.get(report.run_id)
            if run is not None and run.worker is worker:
                run.inbox.put_nowait(report.event)
        elif isinstance(report, SessionReleased):
            task = asyncio.ensure_future(self._session_closed(report))
            self._callbacks.add(task)
            task.add_done_callback(self._callbacks.discard)
        elif isinstance(report, BrowserClosed) and self._on_browser_closed is not None:
            task = asyncio.ensure_future(self._on_browser_closed(report))
            self._callbacks.add(task)
            task.add_done_callback(self._callbacks.discard)
        elif isinstance(report, WorkerGone):
            run = self._active.get(worker.current_run) if worker.current_run else None
            if run is not None and run.worker is worker:
                run.inbox.put_nowait(report)
            else:
                self._replace(worker)  # an idle worker died

    async def _session_closed(self, released: SessionReleased) -> None:
        owner = self._session_owner.pop(released.run_id, None)
        if owner is None:
            return
        owner.sessions.discard(released.run_id)
        waiter = self._releases.pop(released.run_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._on_session_released is not None:
            try:
                await self._on_session_released(released)
            except Exception:
                logger.exception("on_session_released failed for run %s", released.run_id)

    # --- runs ------------------------------------------------------------------------------------

    async def execute(self, job: RunJob, on_event: EventCallback) -> RunFinished:
        """Run ``job`` on the next free worker, forwarding its events; return how it finished.

        The returned outcome is also the last event passed to ``on_event``. If ``on_event`` raises, or
        the caller is cancelled, the run is abandoned: its worker is replaced and the exception propagates.
        """
        if self._idle is None or self._closed:
            raise RuntimeError("the pool is not running")
        problems = check_syntax(job.steps)
        if problems:  # found before any browser starts
            return await self._finish_here(job, syntax_failure(job, problems[0], utcnow()), on_event)
        run = _ActiveRun(job)
        self._active[job.run_id] = run
        try:
            worker = await self._claim_worker(run)
            if worker is None:
                return await self._finish_here(job, self._cancelled_before_start(job), on_event)
            return await self._run_on(worker, run, on_event)
        finally:
            self._active.pop(job.run_id, None)

    async def _claim_worker(self, run: _ActiveRun) -> WorkerHandle | None:
        """The next idle worker, or None when the run is cancelled while it waits."""
        assert self._idle is not None
        while not run.cancelled.is_set():
            getter = asyncio.ensure_future(self._idle.get())
            cancelled = asyncio.ensure_future(run.cancelled.wait())
            try:
                await asyncio.wait({getter, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                cancelled.cancel()
                if not getter.done():
                    getter.cancel()
            if not getter.done() or getter.cancelled():
                continue
            worker = getter.result()
            if not worker.ready:  # it died while idle; its replacement will queue up
                continue
            if run.cancelled.is_set():
                self._idle.put_nowait(worker)
                return None
            return worker
        return None

    def _cancelled_before_start(self, job: RunJob) -> RunFinished:
        if not job.steps:
            return finished_run(job, [], utcnow())
        first = min(job.steps, key=lambda s: s.order)
        message = f"run cancelled before {step_label(first)}"
        return failed_run(job, [], first, RunErrorKind.CANCELLED, message, started_at=utcnow())

    async def _finish_here(self, job: RunJob, outcome: RunFinished, on_event: EventCallback) -> RunFinished:
        """Report an outcome the pool decided without a worker (or after killing one)."""
        if outcome.error is not None:
            log = LogEvent(
                at=utcnow(), level="error", message=outcome.error.message, step_id=outcome.error.step_id
            )
            await on_event(mask_event(log, job.secrets))
        await on_event(outcome)
        return outcome

    async def _run_on(self, worker: WorkerHandle, run: _ActiveRun, on_event: EventCallback) -> RunFinished:
        job = run.job
        run.worker = worker
        worker.current_run = job.run_id
        finished = False
        try:
            if not await worker.send(StartRun(job)):
                run.inbox.put_nowait(WorkerGone(None))
            outcome = await self._follow(worker, run, on_event)
            finished = True
            return outcome
        finally:
            worker.current_run = None
            if finished and worker.ready:
                assert self._idle is not None
                self._idle.put_nowait(worker)
            else:
                self._replace(worker)

    async def _follow(self, worker: WorkerHandle, run: _ActiveRun, on_event: EventCallback) -> RunFinished:
        """Forward the run's events until it finishes, killing the worker when a limit passes."""
        job = run.job
        watch = RunWatch(job)
        while True:
            try:
                item = await asyncio.wait_for(run.inbox.get(), watch.seconds_left())
            except TimeoutError:
                kind, message = watch.overrun()
                await asyncio.to_thread(worker.kill)
                return await self._finish_here(job, watch.outcome(kind, message), on_event)
            if item is None:  # a cancel request: only the deadlines change
                watch.cancel_requested()
                continue
            if isinstance(item, WorkerGone):
                message = f"worker process {item.describe()} {watch.where()}"
                return await self._finish_here(job, watch.outcome(RunErrorKind.ERROR, message), on_event)
            watch.observe(item)
            if isinstance(item, SessionSaved):
                worker.sessions.add(job.run_id)
                self._session_owner[job.run_id] = worker
            await on_event(item)
            if isinstance(item, RunFinished):
                return item

    async def cancel(self, run_id: uuid.UUID) -> bool:
        """Stop a queued or running run (it fails with kind ``cancelled``); False if it is not running."""
        run = self._active.get(run_id)
        if run is None:
            return False
        run.cancelled.set()
        if run.worker is not None:
            await run.worker.send(CancelRun(run_id))
            run.inbox.put_nowait(None)
        return True

    async def release_session(self, run_id: uuid.UUID) -> bool:
        """Close the browser held for a run's saved session; False if no session is held for it."""
        owner = self._session_owner.get(run_id)
        if owner is None:
            return False
        waiter = self._releases.setdefault(run_id, asyncio.get_running_loop().create_future())
        if not await owner.send(ReleaseSession(run_id)):
            await self._session_closed(SessionReleased(run_id=run_id, reason="worker stopped"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(waiter), RELEASE_WAIT_SECONDS)
        return True

    def held_sessions(self) -> list[uuid.UUID]:
        """Run ids whose saved session is held open."""
        return list(self._session_owner)
