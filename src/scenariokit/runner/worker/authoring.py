"""The worker side of an authoring session: a run's browser kept live for code sent one piece at a time.

The session starts as a run does (:class:`.execution.RunExecution`: the worker's warm browser, a
context from the saved session when there is one, the replayed steps in order), and then, instead of
closing, answers the parent's requests: execute this code in the page (with the names a run's steps
have, in the namespace the replayed steps left, under the step's time limit), or describe the page
now (URL, title, Playwright's ARIA snapshot, a screenshot when asked). A failing exec is an answer,
not the session's end. Everything sent is masked again by the parent, which holds the secrets too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from playwright.async_api import Page

from scenariokit.domain.authoring import AuthoringReply, PageState
from scenariokit.domain.job import LogEvent, RunEvent, RunFinished, RunJob, compiled
from scenariokit.domain.model import RunError, RunErrorKind
from scenariokit.runner.confinement.sandbox import ResourceLimits
from scenariokit.runner.protocol import (
    AuthoringExec,
    AuthoringLook,
    Report,
    RunReport,
    mask_event,
    seconds,
)
from scenariokit.runner.worker.execution import LivePage, ReadyPage, RunExecution, close_browser
from scenariokit.runner.worker.plugin_hooks import PluginHooks
from scenariokit.runner.worker.stepcode import compile_step

logger = logging.getLogger(__name__)

#: the bound on reading the page's title, snapshot and screenshot after a request
PAGE_STATE_SECONDS = 5.0
#: a snapshot longer than this is cut in the worker already (the parent cuts to the contract's bound
#: after masking; this only keeps a huge page from filling the pipe)
WORKER_SNAPSHOT_CHARS = 1_000_000


class AuthoringLive:
    """One authoring session inside its worker: started once, then one request at a time."""

    def __init__(
        self,
        job: RunJob,
        *,
        open_browser: Callable[[RunJob], Awaitable[Any]],
        ready_page: ReadyPage | None,
        hooks: PluginHooks,
        limits: ResourceLimits,
        send: Callable[[Report], None],
    ) -> None:
        self.job = job
        self._send = send
        self._outcome: RunFinished | None = None
        self._execution = RunExecution(
            job,
            open_browser=open_browser,
            hooks=hooks,
            report=self._report,
            limits=limits,
            ready_page=ready_page,
            needs_steps=False,
        )
        self._lock = asyncio.Lock()
        self._browser: Any = None

    def _report(self, event: RunEvent) -> None:
        """The replay's and the execs' events: log lines go to the parent, the outcome is kept."""
        if isinstance(event, LogEvent):
            self._send(RunReport(run_id=self.job.run_id, event=mask_event(event, self.job.secrets)))
        elif isinstance(event, RunFinished):
            self._outcome = event

    @property
    def _live(self) -> LivePage | None:
        return self._execution.live

    async def start(self, request: int) -> None:
        """Open the browser, replay the job's steps and answer with the page and the replay's results."""
        async with self._lock:
            end = await self._execution.execute()
            self._browser = end.browser
            outcome = self._outcome
            results = outcome.step_results if outcome is not None else ()
            if self._live is None:  # the browser or the context never came up
                error = outcome.error if outcome is not None else None
                error = error or RunError(kind=RunErrorKind.ERROR, message="the session could not start")
                self._send(AuthoringReply(request=request, ok=False, error=error, page=None, results=results))
                return
            page = await self._page_state(screenshot=False)
            self._send(AuthoringReply(request=request, ok=True, error=None, page=page, results=results))

    async def handle(self, command: AuthoringExec | AuthoringLook) -> None:
        """Answer one request; the lock keeps two from interleaving in the page."""
        async with self._lock:
            if self._live is None:
                missing = RunError(kind=RunErrorKind.ERROR, message="the session has no live page")
                self._send(AuthoringReply(request=command.request, ok=False, error=missing, page=None))
                return
            error = await self._exec(command) if isinstance(command, AuthoringExec) else None
            page = await self._page_state(command.screenshot)
            self._send(AuthoringReply(request=command.request, ok=error is None, error=error, page=page))

    async def _exec(self, command: AuthoringExec) -> RunError | None:
        """Run the code like a step: None when it passed, else its error (kind and message)."""
        live = self._live
        assert live is not None
        step = compiled(command.step)
        if step.syntax_error is not None:
            line, message = step.syntax_error
            where = f" (line {line})" if line else ""
            return RunError(kind=RunErrorKind.ERROR, message=f"SyntaxError: {message}{where}")
        deadline = asyncio.get_running_loop().time() + step.timeout_seconds
        failure = await self._execution.run_step(live.namespace, step, compile_step(step), deadline)
        if failure is None:
            return None
        kind, message = failure
        if kind is RunErrorKind.TIMEOUT:
            message = f"exec {step.order} exceeded its time limit of {seconds(step.timeout_seconds)}"
        return RunError(kind=kind, message=message)

    def _current_page(self) -> Any:
        """The page step code works on: ``page`` as the code left it, else the context's newest open one."""
        live = self._live
        assert live is not None
        page = live.namespace.globals.get("page")
        if isinstance(page, Page) and not page.is_closed():
            return page
        with contextlib.suppress(Exception):
            pages = [p for p in live.context.pages if not p.is_closed()]
            return pages[-1] if pages else None
        return None

    async def _page_state(self, screenshot: bool) -> PageState:
        """URL, title, ARIA snapshot (and a PNG when asked) of the current page, each bounded in time."""
        page = self._current_page()
        if page is None:
            return PageState(url=None, title=None, snapshot=None)
        millis = PAGE_STATE_SECONDS * 1000
        title = await _bounded(page.title())
        snapshot = await _bounded(page.locator("body").aria_snapshot(timeout=millis))
        shot = await _bounded(page.screenshot(type="png", timeout=millis)) if screenshot else None
        return PageState(
            url=page.url if isinstance(page.url, str) else None,
            title=title if isinstance(title, str) else None,
            snapshot=snapshot[:WORKER_SNAPSHOT_CHARS] if isinstance(snapshot, str) else None,
            screenshot=shot if isinstance(shot, bytes) else None,
        )

    async def close(self) -> None:
        """Close the session's browser (the worker's exit is the backstop)."""
        live = self._live
        browser = live.browser if live is not None else self._browser
        if browser is not None:
            await close_browser(browser)


async def _bounded(call: Awaitable[Any]) -> Any:
    """``call``'s result, or None when it fails or takes longer than :data:`PAGE_STATE_SECONDS`."""
    try:
        async with asyncio.timeout(PAGE_STATE_SECONDS + 1):
            return await call
    except Exception as exc:
        logger.debug("page state not read: %s: %s", type(exc).__name__, exc)
        return None
