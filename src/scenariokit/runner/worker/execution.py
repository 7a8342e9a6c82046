"""One run inside a worker process: a fresh context, the steps in order, and what the run leaves behind.

Time limits here are cooperative (``asyncio``): a step that awaits is stopped at its limit with a proper
result and screenshot. Code that never yields is the parent's to stop (see :mod:`.executor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import types
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import attrs

from scenariokit.domain.code import nothing_to_run
from scenariokit.domain.job import (
    ArtifactSaved,
    LogEvent,
    RunEvent,
    RunFinished,
    RunJob,
    SessionSaved,
    StepFinished,
    StepJob,
    StepStarted,
    compiled,
)
from scenariokit.domain.model import RunError, RunErrorKind, StepResult, StepStatus, utcnow
from scenariokit.runner.confinement.sandbox import ResourceLimits, describe_limit
from scenariokit.runner.protocol import (
    LIMIT_TOLERANCE_SECONDS,
    failed_run,
    finished_run,
    run_timeout_message,
    step_label,
    step_timeout_message,
    syntax_failure,
)
from scenariokit.runner.worker.browser import video_recorder
from scenariokit.runner.worker.plugin_hooks import PluginHooks
from scenariokit.runner.worker.step_watch import StepWatch
from scenariokit.runner.worker.stepcode import (
    SnippetLibrary,
    StepHelpers,
    StepNamespace,
    check_syntax,
    compile_step,
    describe_failure,
)

#: how long a step stopped at its limit gets to unwind before it is abandoned
STEP_UNWIND_SECONDS = 0.25
SCREENSHOT_TIMEOUT_SECONDS = 5.0
#: bound on reading the storage state and on closing a browser
BROWSER_CALL_TIMEOUT_SECONDS = 10.0
TRACE_FILE = "trace.zip"
VIDEO_FILE = "video.webm"
#: where Playwright writes videos while it records, inside the run's artifact folder (never served)
VIDEO_WORK_DIR = ".video"

Failure = tuple[RunErrorKind, str]
#: failures of the step's own code, which a coroutine it never awaited explains better: an ``expect``
#: that found nothing, or a click that waited out the step's limit, because a ``goto`` never ran
STEP_CODE_FAILURES = (RunErrorKind.ASSERTION, RunErrorKind.ERROR, RunErrorKind.TIMEOUT)
#: ``ready_page(job, browser) -> (context, page) | None``: a context and page made ahead on that browser
ReadyPage = Callable[[RunJob, Any], Awaitable["tuple[Any, Any] | None"]]


@attrs.frozen
class HeldSession:
    """A saved session's live browser, kept open after its run."""

    run_id: Any
    browser: Any
    context: Any


@attrs.frozen
class LivePage:
    """The browser, context, page and step namespace of a run, kept for an authoring session that
    goes on where the replayed steps left off (:mod:`.authoring`)."""

    browser: Any
    context: Any
    page: Any
    namespace: StepNamespace


@attrs.frozen
class RunEnd:
    """What a finished run leaves to the worker: its browser to close, or its session to hold."""

    browser: Any | None = None
    session: HeldSession | None = None


async def close_browser(browser: Any) -> None:
    """Close a browser, giving up quietly after a bound (the worker's process group is the backstop)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(BROWSER_CALL_TIMEOUT_SECONDS):
            await browser.close()


class RunExecution:
    """Executes one :class:`RunJob` and reports its events through ``report``."""

    def __init__(
        self,
        job: RunJob,
        *,
        open_browser: Callable[[RunJob], Awaitable[Any]],
        hooks: PluginHooks,
        report: Callable[[RunEvent], None],
        limits: ResourceLimits | None = None,
        ready_page: ReadyPage | None = None,
        needs_steps: bool = True,
    ) -> None:
        self.job = job
        #: a run with nothing to run fails (an authoring session may start from no step)
        self._needs_steps = needs_steps
        self._limits = limits or ResourceLimits()
        self._open_browser = open_browser
        self._ready_page = ready_page
        self._hooks = hooks
        self._report = report
        self._stop = asyncio.Event()
        self._current: StepJob | None = None
        #: when the run reached each point (job.RUN_MARKS), sent with its outcome for the run's timings
        self._marks: dict[str, datetime] = {}
        #: the run's page and namespace once its steps began (an authoring session goes on with them)
        self.live: LivePage | None = None
        #: the videos of the run's pages, in the order they opened, while the run records them
        self._videos: list[Any] | None = None

    def cancel(self) -> None:
        """Stop the run at once; it fails with kind ``cancelled``."""
        self._stop.set()

    def _log(self, level: str, message: str) -> None:
        step_id = self._current.id if self._current else None
        self._report(LogEvent(at=utcnow(), level=level, message=message, step_id=step_id))

    async def execute(self) -> RunEnd:
        """Run the job to its end and report how it went.

        The run's browser is left to the caller (closing it need not delay the next run): it comes back
        as the session to hold when the run saved its session, else as the browser to close.
        """
        # compiled once: a job from the store comes compiled; any other is compiled here, not per use
        self.job = job = attrs.evolve(self.job, steps=tuple(compiled(step) for step in self.job.steps))
        started = self._mark("received")
        problems = check_syntax(job.steps)
        if problems:
            outcome = syntax_failure(job, problems[0], started)
            self._log("error", outcome.error.message if outcome.error else "syntax error")
            self._report_outcome(outcome)
            return RunEnd()
        nothing = nothing_to_run([step.exec_code for step in job.steps]) if self._needs_steps else None
        if nothing is not None:
            self._fail_outside_steps(started, nothing)
            return RunEnd()
        if self._hooks.problem:
            self._log("warning", self._hooks.problem)
        try:
            browser = await self._open_browser(job)
            self._mark("browserReady")
        except Exception as exc:
            self._fail_outside_steps(started, f"could not start the browser: {type(exc).__name__}: {exc}")
            return RunEnd()
        try:
            made = await self._ready_page(job, browser) if self._ready_page is not None else None
            context, page = made if made is not None else (None, None)
            if context is None:
                context = await self._new_context(browser)
            outcome = await self._run_steps(browser, context, page, started)
            cancelled = outcome.error is not None and outcome.error.kind is RunErrorKind.CANCELLED
            keep = job.save_session and not cancelled and await self._save_session(context)
            if self._videos is not None:
                await self._save_videos(context, failed=outcome.status == "fail" and not cancelled)
            self._report_outcome(outcome)
        except Exception as exc:
            self._fail_outside_steps(started, f"run setup failed: {type(exc).__name__}: {exc}")
            return RunEnd(browser=browser)
        return RunEnd(session=HeldSession(job.run_id, browser, context)) if keep else RunEnd(browser=browser)

    def _fail_outside_steps(self, started: datetime, message: str) -> None:
        self._log("error", message)
        error = RunError(kind=RunErrorKind.ERROR, message=message)
        self._report_outcome(finished_run(self.job, [], started, error))

    def _mark(self, point: str) -> datetime:
        self._marks[point] = now = utcnow()
        return now

    def _report_outcome(self, outcome: RunFinished) -> None:
        self._mark("reported")
        self._report(attrs.evolve(outcome, marks=dict(self._marks)))

    async def _new_context(self, browser: Any) -> Any:
        """The run's browser context, made with its browser settings (docs/browser.md)."""
        job = self.job
        options: dict[str, Any] = dict(job.context_options)
        if job.http_credentials is not None:
            linked = next((c for c in job.credentials if c.alias == job.http_credentials), None)
            if linked is None:  # the service checks the alias when it builds the job; this is a backstop
                raise LookupError(f"httpCredentials names {job.http_credentials!r}, which is not linked")
            options["http_credentials"] = {"username": linked.username or "", "password": linked.secret or ""}
        video = self._video_mode()
        if video != "off":
            options["record_video_dir"] = str(job.artifacts_dir / VIDEO_WORK_DIR)
        context = await browser.new_context(storage_state=job.storage_state, **options)
        if video != "off":
            self._videos = []
            context.on("page", self._page_opened)
        for pattern in job.block_urls:
            await context.route(pattern, _blocked)
        return context

    def _page_opened(self, page: Any) -> None:
        if self._videos is not None:
            self._videos.append(page.video)

    def _video_mode(self) -> str:
        """The run's video mode: like traces, ``retain-on-failure`` records no run with linked credentials.

        A video shows what the page showed (a password typed in clear on a page that shows it, say),
        which masking cannot reach; such a run is recorded only when asked explicitly, with ``on``.
        A run that keeps its session records none: its pages stay open, and a video ends with its page.
        """
        job = self.job
        if job.video == "off":
            return "off"
        if job.save_session:
            self._log("info", "no video: the run keeps its browser session open (saveSession)")
            return "off"
        if job.video == "retain-on-failure" and job.secrets:
            self._log(
                "info",
                "no video: the run uses linked credentials and a video shows what the page showed; "
                'browser video "on" records one anyway',
            )
            return "off"
        missing = video_recorder()
        if missing is not None:
            self._log("warning", f"no video: {missing}")
            return "off"
        return job.video

    async def _save_videos(self, context: Any, *, failed: bool) -> None:
        """Close the context (a video is complete once its page closed) and keep the videos asked for.

        The first page's video is ``video.webm``, later pages' ``video-2.webm`` and so on.
        """
        videos, self._videos = self._videos or [], None
        keep = self.job.video == "on" or failed
        work = self.job.artifacts_dir / VIDEO_WORK_DIR
        try:
            async with asyncio.timeout(BROWSER_CALL_TIMEOUT_SECONDS):
                await context.close()
            for index, video in enumerate(videos, start=1):
                if video is None:
                    continue
                if keep:
                    name = VIDEO_FILE if index == 1 else f"video-{index}.webm"
                    path = self.job.artifacts_dir / name
                    async with asyncio.timeout(BROWSER_CALL_TIMEOUT_SECONDS):
                        await video.save_as(path)
                    self._report(ArtifactSaved(name=name))
        except Exception as exc:
            self._log("warning", f"video not saved: {type(exc).__name__}: {exc}")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _trace_mode(self) -> str:
        """The run's trace mode: ``on-failure`` records no trace of a run with linked credentials.

        A trace holds what the page held (typed passwords, tokens in requests), which masking cannot
        reach; such a run is traced only when tracing is asked for explicitly, with ``always``.
        """
        job = self.job
        if job.trace == "on-failure" and job.secrets:
            self._log(
                "info",
                "no trace: the run uses linked credentials and a trace holds what the page held; "
                "SCENARIOKIT_TRACE=always records one anyway",
            )
            return "off"
        return job.trace

    async def _run_steps(self, browser: Any, context: Any, page: Any, started: datetime) -> RunFinished:
        """The steps on ``page`` (made here when None); a trace started now still covers that page."""
        job = self.job
        trace = self._trace_mode()
        if trace != "off":
            await context.tracing.start(screenshots=True, snapshots=True)
        if page is None:
            page = await context.new_page()
        self._mark("pageReady")
        namespace = StepNamespace(
            page=page,
            context=context,
            browser=browser,
            helpers=StepHelpers(job, self._hooks.step_helpers(job)),
            snippets=SnippetLibrary(job.snippets, self._hooks.snippet_sources()),
            log_sink=self._log,
        )
        self.live = LivePage(browser, context, page, namespace)
        steps = sorted(job.steps, key=lambda s: s.order)
        outcome = await self._run_each(namespace, steps, started)
        self._current = None
        error = outcome.error
        # a cancelled run stops at once: no screenshot, no trace
        failed = error is not None and error.kind is not RunErrorKind.CANCELLED
        if failed and error is not None:
            failed_step = next((s for s in steps if s.id == error.step_id), None)
            if failed_step is not None:
                await self._screenshot(context, page, failed_step)
        if trace != "off":
            await self._stop_trace(context, keep=failed or (trace == "always" and error is None))
        return outcome

    async def _run_each(
        self, namespace: StepNamespace, steps: Sequence[StepJob], started: datetime
    ) -> RunFinished:
        loop = asyncio.get_running_loop()
        # the run's clock starts with its first step: browser start-up is the runner's cost, not the run's
        run_deadline = loop.time() + self.job.run_timeout
        results: list[StepResult] = []
        for step in steps:
            self._current = step
            step_started = utcnow()
            self._report(StepStarted(step_id=step.id, at=step_started))
            failure = await self.run_step(namespace, step, compile_step(step), run_deadline)
            if failure is not None:
                kind, message = failure
                outcome = failed_run(
                    self.job, results, step, kind, message, started_at=started, step_started_at=step_started
                )
                self._report(StepFinished(next(r for r in outcome.step_results if r.step_id == step.id)))
                self._log("error", f"{step_label(step)} failed: {message}")
                return outcome
            result = StepResult(
                step_id=step.id,
                order=step.order,
                status=StepStatus.PASS,
                title=step.title,
                started_at=step_started,
                duration_ms=int((utcnow() - step_started).total_seconds() * 1000),
            )
            results.append(result)
            self._report(StepFinished(result))
        return finished_run(self.job, results, started)

    async def run_step(
        self, namespace: StepNamespace, step: StepJob, code: types.CodeType, run_deadline: float
    ) -> Failure | None:
        """Run one step within its limit; None when it passed, else why it failed.

        An authoring session runs each exec through here too, on the namespace its replay left.
        """
        if self._stop.is_set():
            return RunErrorKind.CANCELLED, f"run cancelled before {step_label(step)}"
        watch = StepWatch(self._log, functools.partial(self._source_of, namespace, step))
        with watch.watching(step, namespace.globals):
            failure = await self._run_watched(namespace, step, code, run_deadline)
        if not watch.unawaited or (failure is not None and failure[0] not in STEP_CODE_FAILURES):
            return failure
        if failure is not None:  # most likely a consequence: the call that never ran is the cause
            label = step_label(step)  # a time limit's message names the step already: say it once
            also = failure[1].removeprefix(f"{label} ")
            self._log("warning", f"{label} also failed: {also}")
        return RunErrorKind.ERROR, watch.unawaited[0].message(step)

    def _source_of(self, namespace: StepNamespace, step: StepJob, filename: str) -> str | None:
        """The code of a step (this one, or one of the run) or of a snippet, by its file name."""
        if filename == step.filename:
            return step.exec_code
        found = next((s.exec_code for s in self.job.steps if s.filename == filename), None)
        return found if found is not None else namespace.source_of(filename)

    async def _run_watched(
        self, namespace: StepNamespace, step: StepJob, code: types.CodeType, run_deadline: float
    ) -> Failure | None:
        label = step_label(step)
        remaining = run_deadline - asyncio.get_running_loop().time()
        run_limit_binds = remaining < step.timeout_seconds - LIMIT_TOLERANCE_SECONDS
        task = asyncio.ensure_future(namespace.run(code))
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait(
                {task, stopped},
                timeout=max(min(step.timeout_seconds, remaining), 0),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            stopped.cancel()
        if task.done():
            if task.cancelled():
                return RunErrorKind.ERROR, f"CancelledError: step code was cancelled during {label}"
            exc = task.exception()
            if exc is None:
                return None
            kind, message = describe_failure(exc, step)
            limit = describe_limit(exc, self._limits)
            return kind, message if limit is None else f"{message}: {limit}"
        task.cancel()
        task.add_done_callback(_consume_outcome)
        await asyncio.wait({task}, timeout=STEP_UNWIND_SECONDS)
        if self._stop.is_set():
            return RunErrorKind.CANCELLED, f"run cancelled during {label}"
        if run_limit_binds:
            return RunErrorKind.TIMEOUT, run_timeout_message(self.job, step)
        return RunErrorKind.TIMEOUT, step_timeout_message(step)

    async def _screenshot(self, context: Any, page: Any, step: StepJob) -> None:
        target = (
            page
            if not page.is_closed()
            else next((p for p in reversed(context.pages) if not p.is_closed()), None)
        )
        if target is None:
            self._log("warning", f"no screenshot of {step_label(step)}: no open page")
            return
        name = f"step-{step.order}.png"
        try:
            self.job.artifacts_dir.mkdir(parents=True, exist_ok=True)
            async with asyncio.timeout(SCREENSHOT_TIMEOUT_SECONDS + 1):
                await target.screenshot(
                    path=self.job.artifacts_dir / name, timeout=SCREENSHOT_TIMEOUT_SECONDS * 1000
                )
        except Exception as exc:
            self._log("warning", f"no screenshot of {step_label(step)}: {type(exc).__name__}: {exc}")
            return
        self._report(ArtifactSaved(name=name))

    async def _stop_trace(self, context: Any, *, keep: bool) -> None:
        try:
            if not keep:
                await context.tracing.stop()
                return
            self.job.artifacts_dir.mkdir(parents=True, exist_ok=True)
            await context.tracing.stop(path=self.job.artifacts_dir / TRACE_FILE)
        except Exception as exc:
            self._log("warning", f"trace not saved: {type(exc).__name__}: {exc}")
            return
        self._report(ArtifactSaved(name=TRACE_FILE))

    async def _save_session(self, context: Any) -> bool:
        try:
            async with asyncio.timeout(BROWSER_CALL_TIMEOUT_SECONDS):
                state = await context.storage_state()
        except Exception as exc:
            self._log("warning", f"session not saved: {type(exc).__name__}: {exc}")
            return False
        try:
            token = self._hooks.extract_token(state)
        except Exception as exc:
            self._log("warning", f"no session token: extracting it failed: {type(exc).__name__}: {exc}")
            token = None
        self._report(SessionSaved(storage_state=dict(state), token=token))
        return True


async def _blocked(route: Any) -> None:
    """A request to a blocked URL (``blockUrls``): aborted before it leaves the browser."""
    await route.abort("blockedbyclient")


def _consume_outcome(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned step's outcome so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
