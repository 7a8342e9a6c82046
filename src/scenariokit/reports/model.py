"""The values a report page shows, built from a run as the services return it.

Nothing here reads a store or knows a URL scheme: the caller (the service's views, the local report
writer) says where artifacts, the trace and other pages live, through plain strings and callables. So
one page serves both: served at ``/report/runs/{id}`` and written to ``DIR/<scenario>.html``. Every value
is text for the template to escape; step errors and log lines arrive masked (secrets are replaced at
write time), and the page shows nothing of the environment but its name.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

import attrs

from scenariokit.domain.browser import BrowserSettings, Geolocation, HttpCredentials, Viewport
from scenariokit.domain.fields import camel
from scenariokit.domain.model import Run, RunLogEntry, StepStatus
from scenariokit.formats.presenters import artifact_content_type, trace_artifact

RUN_STATUSES = ("in_progress", "pass", "fail")
__all__ = ["artifact_content_type", "trace_artifact"]  # re-exported: the pages' callers use them


def failure_screenshot(run: Run) -> str | None:
    """The screenshot of the failed step (``step-N.png``), else the run's first screenshot, if any."""
    shots = [name for name in run.artifacts if name.endswith(".png")]
    failed = next((r for r in run.step_results if r.status is StepStatus.FAIL), None)
    preferred = f"step-{failed.order}.png" if failed is not None else None
    return preferred if preferred in shots else (shots[0] if shots else None)


def duration_text(milliseconds: int | None) -> str:
    """``850 ms``, ``12.3 s``, ``2 min 5 s``; ``—`` when unknown."""
    if milliseconds is None:
        return "—"
    if milliseconds < 1000:
        return f"{milliseconds} ms"
    seconds = milliseconds / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def time_text(value: datetime | None) -> str:
    """A timestamp as ``2026-11-23 13:38:17 UTC``; ``—`` when unknown."""
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "—"


@attrs.frozen
class ArtifactLink:
    """A file the run recorded, where the page links it."""

    name: str
    url: str
    content_type: str


@attrs.frozen
class StepRow:
    """One step as the page lists it."""

    order: int
    title: str
    status: str
    duration: str
    error: str | None = None


@attrs.frozen
class AttemptRow:
    """One attempt of a retried run (each in a fresh browser), as the page lists it."""

    attempt: int
    status: str
    duration: str
    error: str | None = None


@attrs.frozen
class LogLine:
    """One line of the run log."""

    level: str
    message: str


@attrs.frozen
class Pager:
    """Where a paged list is: page ``page`` of ``pages`` (``total`` items), and the links around it."""

    page: int
    pages: int
    total: int
    previous_url: str | None = None
    next_url: str | None = None


@attrs.frozen
class RunPage:
    """Everything the page of one run shows."""

    run_id: str
    scenario: str
    environment: str
    status: str
    created_at: str
    started_at: str
    finished_at: str
    duration: str
    steps: tuple[StepRow, ...] = ()
    #: every attempt, when the run was tried more than once (the status is the last one's)
    attempts: tuple[AttemptRow, ...] = ()
    #: a failed attempt was followed by a passing one
    flaky: bool = False
    error_kind: str | None = None
    error_message: str | None = None
    #: ``step 2 "Check the title"`` when a step failed
    failed_step: str | None = None
    screenshot: ArtifactLink | None = None
    #: where the trace opens (the service's trace viewer), or the trace file itself (local reports)
    trace_url: str | None = None
    #: how to open the trace when the page cannot (a local report: ``playwright show-trace``)
    trace_hint: str | None = None
    artifacts: tuple[ArtifactLink, ...] = ()
    #: the browser settings the run executed with, in one line (None: Playwright's default context)
    browser: str | None = None
    #: the videos of the run's pages (``video.webm``, ``video-2.webm`` …), shown in the page
    videos: tuple[ArtifactLink, ...] = ()
    log: tuple[LogLine, ...] = ()
    #: the log's paging (the service pages it; a local report holds its whole log)
    log_pager: Pager | None = None
    #: the log filter the service applied (``q``), shown in the filter box
    log_query: str = ""
    #: whether the filter box may ask the server (a served page) or only narrows the lines shown
    log_search: bool = False
    index_url: str | None = None
    #: a local report: the scenario file and line
    source: str | None = None


def browser_summary(settings: BrowserSettings) -> str | None:
    """The settings a run executed with, as a line of the report: ``device Pixel 7 · locale de-DE``.

    Header values are left out (only their names are shown): the page shows what was set, not data.
    """
    parts = []
    for field in attrs.fields(BrowserSettings):
        value = getattr(settings, field.name)
        if value is None:
            continue
        if isinstance(value, Viewport):
            text = f"{value.width}x{value.height}"
        elif isinstance(value, Geolocation):
            text = f"{value.latitude}, {value.longitude}"
        elif isinstance(value, HttpCredentials):
            text = f"credential {value.credential}"
        elif isinstance(value, dict):
            text = ", ".join(value)
        elif isinstance(value, tuple):
            text = ", ".join(value)
        elif isinstance(value, enum.Enum):
            text = str(value.value)
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        else:
            text = str(value)
        parts.append(f"{camel(field.name)} {text}")
    return " · ".join(parts) or None


def _failed_step(run: Run) -> str | None:
    result = None
    if run.error is not None and run.error.step_id is not None:
        result = next((r for r in run.step_results if r.step_id == run.error.step_id), None)
    if result is None:
        result = next((r for r in run.step_results if r.status is StepStatus.FAIL), None)
    if result is None:
        return None
    return f'step {result.order} "{result.title}"' if result.title else f"step {result.order}"


def _attempt_rows(run: Run) -> tuple[AttemptRow, ...]:
    attempts = run.all_attempts
    if len(attempts) < 2:
        return ()
    return tuple(
        AttemptRow(
            attempt=a.attempt,
            status=a.status.value,
            duration=duration_text(
                round((a.finished_at - a.started_at).total_seconds() * 1000)
                if a.started_at and a.finished_at
                else None
            ),
            error=a.error.message if a.error else None,
        )
        for a in attempts
    )


def run_page(
    run: Run,
    *,
    environment: str,
    log: Iterable[RunLogEntry | LogLine],
    artifact_url: Callable[[str], str],
    trace_url: str | None = None,
    trace_hint: str | None = None,
    log_pager: Pager | None = None,
    log_query: str = "",
    log_search: bool = False,
    index_url: str | None = None,
    source: str | None = None,
) -> RunPage:
    """The page of ``run``; ``artifact_url`` gives the link of each file the run recorded, by name."""
    artifacts = tuple(
        ArtifactLink(name, artifact_url(name), artifact_content_type(name)) for name in run.artifacts
    )
    shot = failure_screenshot(run)
    return RunPage(
        run_id=str(run.id),
        scenario=run.scenario_name,
        environment=environment,
        status=run.status.value,
        created_at=time_text(run.created_at),
        started_at=time_text(run.started_at),
        finished_at=time_text(run.finished_at),
        duration=duration_text(run.duration_ms),
        steps=tuple(
            StepRow(
                order=r.order,
                title=r.title or f"step {r.order}",
                status=r.status.value,
                duration=duration_text(r.duration_ms),
                error=r.error,
            )
            for r in sorted(run.step_results, key=lambda r: r.order)
        ),
        attempts=_attempt_rows(run),
        flaky=run.flaky,
        error_kind=run.error.kind.value if run.error else None,
        error_message=run.error.message if run.error else None,
        failed_step=_failed_step(run),
        screenshot=next((a for a in artifacts if a.name == shot), None),
        trace_url=trace_url,
        trace_hint=trace_hint,
        artifacts=artifacts,
        videos=tuple(a for a in artifacts if a.content_type == "video/webm"),
        browser=browser_summary(run.browser),
        log=tuple(line if isinstance(line, LogLine) else LogLine(line.level, line.message) for line in log),
        log_pager=log_pager,
        log_query=log_query,
        log_search=log_search,
        index_url=index_url,
        source=source,
    )


@attrs.frozen
class IndexRow:
    """One run as the index lists it."""

    url: str
    scenario: str
    environment: str
    status: str
    created_at: str
    duration: str
    #: the failure's first line, or ``""``
    summary: str = ""
    source: str | None = None


@attrs.frozen
class IndexPage:
    """The index of runs: newest first, optionally one status only."""

    rows: tuple[IndexRow, ...]
    title: str = "Runs"
    #: the status shown (None: all), and the link of each choice (None: a local index, no filter)
    status: str | None = None
    status_links: tuple[tuple[str, str], ...] = ()
    pager: Pager | None = None
    passed: int = 0
    failed: int = 0


def index_row(run: Run, *, url: str, environment: str, source: str | None = None) -> IndexRow:
    """The index row of ``run``, linking its page at ``url``."""
    summary = ""
    if run.error is not None:
        summary = run.error.message.strip().partition("\n")[0]
        step = _failed_step(run)
        summary = f"{step}: {summary}" if step else summary
    return IndexRow(
        url=url,
        scenario=run.scenario_name,
        environment=environment,
        status=run.status.value,
        created_at=time_text(run.created_at),
        duration=duration_text(run.duration_ms),
        summary=summary,
        source=source,
    )


def pager(page: int, limit: int, total: int, link: Callable[[int], str]) -> Pager:
    """Page ``page`` of ``total`` items, ``limit`` a page; ``link`` gives the URL of a page."""
    pages = max(1, -(-total // limit))
    return Pager(
        page=page,
        pages=pages,
        total=total,
        previous_url=link(page - 1) if page > 1 else None,
        next_url=link(page + 1) if page < pages else None,
    )


def counts(runs: Sequence[Run]) -> tuple[int, int]:
    """How many of ``runs`` passed and how many failed."""
    passed = sum(1 for run in runs if run.status.value == "pass")
    return passed, sum(1 for run in runs if run.status.value == "fail")
