"""A page of runs as REST and MCP list it (``presenters.runs_page_json``): the JSON each run had when it
was shaped alone, each environment and session shaped once for the page, and a finished run of one
attempt shown as that attempt without unstructuring its step results twice."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from scenariokit.domain.model import (
    Environment,
    Run,
    RunAttempt,
    RunError,
    RunErrorKind,
    RunStatus,
    Session,
    StepResult,
    StepStatus,
    utcnow,
)
from scenariokit.formats import presenters as shape
from scenariokit.formats.convert import make_converter
from scenariokit.formats.queries import Page

CONV = make_converter()


def _page() -> Page[shape.RunDetail]:
    start = utcnow()
    end = start + timedelta(seconds=2)
    staging = Environment(name="staging", data={"url": "http://127.0.0.1:9/"})
    local = Environment(name="local", data={"url": "http://127.0.0.1:8/", "user": "ü"})
    saved = Session(name="login", token="abcdefghijkl")
    steps = (
        StepResult(step_id=uuid.uuid4(), order=0, status=StepStatus.PASS, started_at=start, duration_ms=12),
        StepResult(step_id=uuid.uuid4(), order=1, status=StepStatus.FAIL, title="t", error="boom"),
    )
    failed = RunError(kind=RunErrorKind.ASSERTION, message="expected", step_id=steps[1].step_id)
    common: dict[str, Any] = {"scenario_id": uuid.uuid4(), "scenario_name": "checkout", "step_results": steps}
    retried = (
        RunAttempt(attempt=1, status=RunStatus.FAIL, error=failed, step_results=steps, started_at=start),
        RunAttempt(attempt=2, status=RunStatus.PASS, step_results=steps[:1], started_at=start),
    )
    ended: dict[str, Any] = {"started_at": start, "finished_at": end}
    runs = [
        # one attempt, passed; one attempt, failed; retried (attempts stored); still in progress
        (Run(environment_id=staging.id, status=RunStatus.PASS, **ended, **common), staging, None),
        (
            Run(environment_id=staging.id, status=RunStatus.FAIL, error=failed, **ended, **common),
            staging,
            saved,
        ),
        (
            Run(environment_id=local.id, status=RunStatus.PASS, attempts=retried, flaky=True, **common),
            local,
            saved,
        ),
        (Run(environment_id=local.id, started_at=start, **common), local, None),
        (Run(environment_id=uuid.uuid4(), **common), None, None),  # its environment since deleted
    ]
    items = tuple(shape.RunDetail(run=run, environment=env, session=session) for run, env, session in runs)
    return Page(items=items, total=len(items), page=1, limit=20)


def test_each_run_is_shaped_as_it_was_alone() -> None:
    page = _page()
    alone = shape.page_json(page, lambda detail: shape.run_item_json(CONV, detail))
    before = {  # the attempts as they were made before: from run.all_attempts, unstructured again
        **alone,
        "items": [
            {**item, "attempts": CONV.unstructure(detail.run.all_attempts)}
            for item, detail in zip(alone["items"], page.items, strict=True)
        ],
    }
    together = shape.runs_page_json(CONV, page)
    assert json.dumps(together) == json.dumps(before)  # the same keys, in the same order
    assert [item["attempts"][0]["attempt"] for item in together["items"][:3]] == [1, 1, 1]
    assert together["items"][3]["attempts"] == [] and together["items"][4]["environment"] is None


def test_each_environment_and_session_is_shaped_once_for_the_page() -> None:
    items = shape.runs_page_json(CONV, _page())["items"]
    assert items[0]["environment"] is items[1]["environment"]
    assert items[2]["environment"] is items[3]["environment"]
    assert items[0]["environment"] is not items[2]["environment"]
    assert items[1]["session"] is items[2]["session"] and items[1]["session"]["token"] != "abcdefghijkl"
