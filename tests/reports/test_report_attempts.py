"""A retried run's page lists its attempts, and a flaky pass says so; one attempt shows no table."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from scenariokit.domain.model import Run, RunAttempt, RunError, RunErrorKind, RunStatus
from scenariokit.reports.model import run_page
from scenariokit.reports.render import render_run

START = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _page_of(run: Run) -> str:
    page = run_page(run, environment="staging", log=(), artifact_url=lambda name: f"files/{name}")
    return render_run(page, assets="assets")


def test_a_flaky_run_lists_each_attempt_with_its_error() -> None:
    failed = RunAttempt(
        attempt=1,
        status=RunStatus.FAIL,
        error=RunError(kind=RunErrorKind.ASSERTION, message="<b>button</b> not found"),
        started_at=START,
        finished_at=START + timedelta(seconds=2),
    )
    passed = RunAttempt(
        attempt=2,
        status=RunStatus.PASS,
        started_at=START + timedelta(seconds=3),
        finished_at=START + timedelta(seconds=4),
    )
    run = Run(
        scenario_id=uuid.uuid4(),
        environment_id=uuid.uuid4(),
        scenario_name="checkout",
        status=RunStatus.PASS,
        attempts=(failed, passed),
        flaky=True,
        started_at=START,
        finished_at=START + timedelta(seconds=4),
    )

    page = run_page(run, environment="staging", log=(), artifact_url=lambda name: name)
    assert [(a.attempt, a.status, a.duration) for a in page.attempts] == [
        (1, "fail", "2.0 s"),
        (2, "pass", "1.0 s"),
    ]
    html = _page_of(run)
    assert 'id="flaky"' in html and 'id="attempts"' in html
    assert "&lt;b&gt;button&lt;/b&gt; not found" in html  # escaped, as every text on the page


def test_a_run_of_one_attempt_shows_no_attempts_table() -> None:
    run = Run(
        scenario_id=uuid.uuid4(),
        environment_id=uuid.uuid4(),
        scenario_name="home",
        status=RunStatus.PASS,
        started_at=START,
        finished_at=START + timedelta(seconds=1),
    )
    html = _page_of(run)
    assert 'id="attempts"' not in html and 'id="flaky"' not in html
