"""The parent side of authoring sessions: one sandboxed worker process per live session.

A session's worker is started exactly as a run's is (:class:`.worker_handle.WorkerHandle` with the
scheduler pool's :class:`.worker_handle.WorkerLaunch`: minimal environment, private directory,
bubblewrap with a user id of its own, resource limits), and is given the session instead of a run
(:class:`.protocol.StartAuthoring`). It serves the service's :class:`AuthoringControl` port:

- at most ``max_live`` sessions at once (a start beyond is a 409), each closed once idle for
  ``idle_seconds``;
- each request waits for the worker's reply within the code's time limit plus a margin for the page
  state; code that never yields cannot reply, so its worker is killed and the session ends (the
  answer says so);
- every text a worker sends (errors, log lines, its standard output, URL, title, snapshot) is masked
  here with the session's secrets, whatever the worker did to its own masking.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import attrs

from scenariokit.domain.authoring import (
    MAX_SNAPSHOT_CHARS,
    SNAPSHOT_CUT_NOTE,
    AuthoredExec,
    AuthoringRecord,
    AuthoringReply,
    AuthoringStarted,
    ExecOutcome,
    PageLook,
    PageState,
)
from scenariokit.domain.errors import AuthoringEnded, AuthoringUnavailable, Conflict, NotFound
from scenariokit.domain.job import LogEvent, RunJob, StepJob
from scenariokit.domain.model import (
    DEFAULT_STEP_TIMEOUT_SECONDS,
    RunError,
    RunErrorKind,
    StepResult,
    utcnow,
)
from scenariokit.runner.parent.worker_handle import Stream, WorkerGone, WorkerHandle
from scenariokit.runner.protocol import (
    AuthoringExec,
    AuthoringLook,
    Report,
    RunReport,
    StartAuthoring,
    seconds,
)
from scenariokit.runner.worker.masking import LogMasker, mask_text

if TYPE_CHECKING:
    from scenariokit.runner.parent.executor import WorkerPool

logger = logging.getLogger(__name__)

#: beyond the code's own limit: the worker's unwinding and reading the page state (title, snapshot,
#: screenshot, each bounded by :data:`.authoring.PAGE_STATE_SECONDS`) before its reply is overdue
REPLY_MARGIN_SECONDS = 8.0
#: a start's bound beyond its replayed steps' limits: the worker's start-up and the browser
START_MARGIN_SECONDS = 90.0
#: how many ended sessions are remembered, so their id answers why it ended rather than "not found"
REMEMBERED_ENDINGS = 256
#: the longest pause of the idle check
IDLE_CHECK_SECONDS = 5.0


class _Gone(Exception):
    """The session's worker went away while a request waited for its reply."""


@attrs.define(eq=False)
class _Live:
    """One session: its record, its worker, and what arrived from it since the last answer."""

    record: AuthoringRecord
    job: RunJob
    worker: WorkerHandle | None = None
    masker: LogMasker = attrs.field(
        default=attrs.Factory(lambda self: LogMasker(self.job.secrets), takes_self=True)
    )
    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    pending: dict[int, asyncio.Future[AuthoringReply]] = attrs.field(factory=dict)
    logs: list[LogEvent] = attrs.field(factory=list)
    last_used: float = 0.0
    busy: int = 0
    gone: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.job.secrets

    def take_logs(self) -> tuple[LogEvent, ...]:
        """The log lines since the last answer, masked (the held line included)."""
        lines = [*self.logs, *self.masker.flush()]
        self.logs.clear()
        return tuple(lines)


class AuthoringHost:
    """Live authoring sessions of this process, each held by a sandboxed worker of its own."""

    def __init__(self, pool: WorkerPool, *, max_live: int = 2, idle_seconds: float = 600.0) -> None:
        self._pool = pool
        self.max_live = max_live
        self.idle_seconds = idle_seconds
        self._live: dict[uuid.UUID, _Live] = {}
        self._ended: collections.OrderedDict[uuid.UUID, str] = collections.OrderedDict()
        self._requests = itertools.count(1)
        self._idle_check: asyncio.Task[None] | None = None
        self._closed = False
        #: sessions being ended after their worker went away
        self._tasks: set[asyncio.Task[None]] = set()

    # --- the port the service calls ----------------------------------------------------------------

    async def open(self, record: AuthoringRecord, job: RunJob) -> AuthoringStarted:
        """Start a worker for the session, replay its steps, and answer the page (409 beyond the cap)."""
        if self._closed:
            raise AuthoringUnavailable("the server is stopping")
        if len(self._live) >= self.max_live:
            raise Conflict(
                f"{len(self._live)} authoring session(s) are live, the most this server holds "
                f"(SCENARIOKIT_AUTHORING_MAX={self.max_live}); end one with authoring_end "
                "(DELETE /api/v1/authoring/{id}) or wait for an idle one to close"
            )
        launch = self._pool.launch
        if launch is None:
            raise AuthoringUnavailable("no worker can start here: the browser or the sandbox is missing")
        live = _Live(record=record, job=job, last_used=self._now())
        self._live[record.id] = live  # counted against the cap while it starts
        live.busy += 1
        try:
            worker = WorkerHandle(launch)
            live.worker = worker
            worker.secrets = job.secrets
            try:
                await worker.start(
                    lambda w, r: self._on_report(live, r), lambda w, s, t: self._on_output(live, s, t)
                )
            except RuntimeError as exc:
                raise AuthoringUnavailable(f"the session's worker did not start: {exc}") from None
            limit = sum(step.timeout_seconds for step in job.steps) + START_MARGIN_SECONDS
            request = next(self._requests)
            reply = await self._ask(live, StartAuthoring(job=job, request=request), request, limit, "start")
            if not reply.ok or reply.page is None:
                message = reply.error.message if reply.error else "the session could not start"
                raise AuthoringUnavailable(f"the session could not start: {self._mask(live, message)}")
            started = AuthoringStarted(
                authoring_id=record.id,
                page=self._page(live, reply.page),
                replayed=tuple(self._masked_result(live, r) for r in reply.results),
                logs=live.take_logs(),
            )
        except BaseException as exc:
            await self._finish(record.id, "it could not start")
            if isinstance(exc, _Gone):
                raise AuthoringUnavailable(f"the session could not start: {exc}") from None
            raise
        finally:
            live.busy -= 1
            live.last_used = self._now()
        self._watch_idle()
        return started

    async def exec(
        self,
        authoring_id: uuid.UUID,
        code: str,
        *,
        title: str | None = None,
        timeout_seconds: float | None = None,
        screenshot: bool = False,
    ) -> ExecOutcome:
        """Run ``code`` in the session's page; its index, ok or the error, the log, the page after it."""
        live = self._get(authoring_id)
        async with self._using(live):
            index = len(live.record.execs) + 1
            limit = timeout_seconds if timeout_seconds is not None else DEFAULT_STEP_TIMEOUT_SECONDS
            step = StepJob(id=uuid.uuid4(), order=index, title=title, exec_code=code, timeout_seconds=limit)
            request = next(self._requests)
            command = AuthoringExec(request=request, step=step, screenshot=screenshot)
            try:
                reply = await self._ask(live, command, request, limit + REPLY_MARGIN_SECONDS, f"exec {index}")
            except _Gone as exc:
                live.record.execs.append(AuthoredExec(index, code, False, title, timeout_seconds))
                kind = RunErrorKind.TIMEOUT if exc.args and "time limit" in str(exc) else RunErrorKind.ERROR
                ended = RunError(kind=kind, message=self._mask(live, f"{exc}; the session has ended"))
                return ExecOutcome(
                    index=index, ok=False, error=ended, logs=live.take_logs(), page=None, live=False
                )
            ok = reply.ok and reply.error is None
            live.record.execs.append(AuthoredExec(index, code, ok, title, timeout_seconds))
            error: RunError | None = None
            if reply.error is not None:
                error = RunError(kind=reply.error.kind, message=self._mask(live, reply.error.message))
            page = self._page(live, reply.page) if reply.page is not None else None
            return ExecOutcome(index=index, ok=ok, error=error, logs=live.take_logs(), page=page)

    async def look(self, authoring_id: uuid.UUID, *, screenshot: bool = False) -> PageLook:
        """The session's page now, and the log lines since the last answer."""
        live = self._get(authoring_id)
        async with self._using(live):
            request = next(self._requests)
            try:
                reply = await self._ask(
                    live, AuthoringLook(request=request, screenshot=screenshot), request,
                    REPLY_MARGIN_SECONDS, "the snapshot",
                )  # fmt: skip
            except _Gone:
                raise AuthoringEnded(
                    authoring_id, self._ended.get(authoring_id, "its worker stopped")
                ) from None
            page = self._page(live, reply.page) if reply.page is not None else PageState(None, None, None)
            return PageLook(authoring_id=authoring_id, page=page, logs=live.take_logs())

    def record(self, authoring_id: uuid.UUID) -> AuthoringRecord:
        """What the live session has done (NotFound, or AuthoringEnded naming why it ended)."""
        return self._get(authoring_id).record

    async def end(self, authoring_id: uuid.UUID) -> None:
        """Close the session's browser and stop its worker."""
        self._get(authoring_id)
        await self._finish(authoring_id, "ended by request")

    def live_ids(self) -> list[uuid.UUID]:
        """The ids of the live sessions."""
        return list(self._live)

    async def close(self) -> None:
        """End every session (the server is stopping)."""
        self._closed = True
        if self._idle_check is not None:
            self._idle_check.cancel()
            await asyncio.gather(self._idle_check, return_exceptions=True)
        await asyncio.gather(*(self._finish(ident, "the server stopped") for ident in list(self._live)))

    # --- requests -----------------------------------------------------------------------------------

    def _get(self, authoring_id: uuid.UUID) -> _Live:
        live = self._live.get(authoring_id)
        if live is not None and live.gone is None:
            return live
        reason = live.gone if live is not None else self._ended.get(authoring_id)
        if reason is not None:
            raise AuthoringEnded(authoring_id, reason)
        raise NotFound("authoring session", authoring_id)

    @contextlib.asynccontextmanager
    async def _using(self, live: _Live) -> AsyncIterator[None]:
        """One request at a time per session; a session in use is never idle."""
        live.busy += 1
        try:
            async with live.lock:
                if live.gone is not None:
                    raise AuthoringEnded(live.record.id, live.gone)
                yield
        finally:
            live.busy -= 1
            live.last_used = self._now()

    async def _ask(
        self, live: _Live, command: StartAuthoring | AuthoringExec | AuthoringLook, request: int,
        limit: float, what: str,
    ) -> AuthoringReply:  # fmt: skip
        """Send ``command`` and wait for its reply; past ``limit`` the worker is killed (session ended)."""
        worker = live.worker
        assert worker is not None
        waiter: asyncio.Future[AuthoringReply] = asyncio.get_running_loop().create_future()
        live.pending[request] = waiter
        try:
            if not await worker.send(command):
                raise _Gone(live.gone or "the session's worker has stopped")
            try:
                async with asyncio.timeout(limit):
                    return await asyncio.shield(waiter)
            except TimeoutError:
                if what.startswith("exec "):
                    why = f"{what} exceeded its time limit of {seconds(limit - REPLY_MARGIN_SECONDS)}"
                    reason = f"{why} and did not yield, so its worker was stopped"
                else:
                    why = reason = f"{what} did not answer within {seconds(limit)}"
                await self._finish(live.record.id, reason)
                raise _Gone(reason) from None
        finally:
            live.pending.pop(request, None)

    # --- what the worker sends ----------------------------------------------------------------------

    def _on_report(self, live: _Live, report: Report | WorkerGone) -> None:
        if isinstance(report, RunReport) and isinstance(report.event, LogEvent):
            live.logs.extend(live.masker.push(attrs.evolve(report.event, step_id=None)))
        elif isinstance(report, AuthoringReply):
            waiter = live.pending.get(report.request)
            if waiter is not None and not waiter.done():
                waiter.set_result(report)
        elif isinstance(report, WorkerGone):
            reason = f"its worker process {report.describe()}"
            if live.gone is None:
                live.gone = reason
            for waiter in live.pending.values():
                if not waiter.done():
                    waiter.set_exception(_Gone(f"the session's worker process {report.describe()}"))
            task = asyncio.ensure_future(self._finish(live.record.id, reason))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _on_output(self, live: _Live, stream: Stream, text: str) -> None:
        level = "info" if stream == "stdout" else "warning"
        live.logs.extend(live.masker.push(LogEvent(at=utcnow(), level=level, message=text)))

    # --- masking ------------------------------------------------------------------------------------

    def _mask(self, live: _Live, text: str) -> str:
        return mask_text(text, live.secrets)

    def _page(self, live: _Live, page: PageState) -> PageState:
        """The page state masked, its snapshot cut at the contract's bound (after masking)."""
        snapshot = page.snapshot
        if snapshot is not None:
            snapshot = self._mask(live, snapshot)
            if len(snapshot) > MAX_SNAPSHOT_CHARS:
                snapshot = snapshot[: MAX_SNAPSHOT_CHARS - len(SNAPSHOT_CUT_NOTE)] + SNAPSHOT_CUT_NOTE
        return PageState(
            url=self._mask(live, page.url) if page.url is not None else None,
            title=self._mask(live, page.title) if page.title is not None else None,
            snapshot=snapshot,
            screenshot=page.screenshot,
        )

    def _masked_result(self, live: _Live, result: StepResult) -> StepResult:
        if result.error is None:
            return result
        return attrs.evolve(result, error=self._mask(live, result.error))

    # --- ending ---------------------------------------------------------------------------------------

    async def _finish(self, authoring_id: uuid.UUID, reason: str) -> None:
        """Forget the session and stop its worker (its browser dies with it). Idempotent."""
        live = self._live.pop(authoring_id, None)
        if live is None:
            return
        if live.gone is None:
            live.gone = reason
        self._ended[authoring_id] = live.gone
        while len(self._ended) > REMEMBERED_ENDINGS:
            self._ended.popitem(last=False)
        for waiter in live.pending.values():
            if not waiter.done():
                waiter.set_exception(_Gone(live.gone))
        if live.worker is not None:
            await asyncio.to_thread(live.worker.kill)

    def _watch_idle(self) -> None:
        if self._idle_check is None or self._idle_check.done():
            self._idle_check = asyncio.ensure_future(self._close_idle())

    async def _close_idle(self) -> None:
        """Close sessions nobody used for ``idle_seconds``, until none is left."""
        pause = min(max(self.idle_seconds / 4, 0.05), IDLE_CHECK_SECONDS)
        while self._live:
            await asyncio.sleep(pause)
            now = self._now()
            for ident, live in list(self._live.items()):
                if live.busy == 0 and now - live.last_used >= self.idle_seconds:
                    logger.info("closing authoring session %s: idle for %g s", ident, self.idle_seconds)
                    await self._finish(ident, f"it was idle for more than {self.idle_seconds:g} s")

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()
