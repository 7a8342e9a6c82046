"""Every example in docs/step-code.md runs as written, in order, as the steps of one scenario."""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from scenariokit.domain.code import unawaited_calls
from scenariokit.domain.job import CredentialValue, LogEvent, RunEvent, RunFinished, RunJob, StepJob

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

DOC = Path(__file__).parents[2] / "docs" / "step-code.md"
BLOCK = re.compile(r'^```python(?: title="(?P<title>[^"]*)")?\n(?P<code>.*?)^```$', re.MULTILINE | re.DOTALL)
SNIPPET_TITLE = re.compile(r"^Snippet: (?P<alias>\S+)$")


def doc_examples() -> tuple[list[str], dict[str, str]]:
    """The doc's step examples in order, and its snippets by alias."""
    steps: list[str] = []
    snippets: dict[str, str] = {}
    for block in BLOCK.finditer(DOC.read_text()):
        snippet = SNIPPET_TITLE.match(block["title"] or "")
        if snippet:
            snippets[snippet["alias"]] = block["code"]
        else:
            steps.append(block["code"])
    return steps, snippets


async def test_every_example_in_the_step_code_guide_runs_as_written(
    make_job: Callable[..., RunJob],
    run: Callable[[RunJob], Awaitable[tuple[RunFinished, list[RunEvent]]]],
    site: str,
) -> None:
    steps, snippets = doc_examples()
    assert len(steps) >= 10 and "login" in snippets
    secret = "correct-horse-battery"
    job = make_job(
        *[
            StepJob(
                id=uuid.uuid4(), order=order, title=f"doc example {order}", exec_code=code, timeout_seconds=15
            )
            for order, code in enumerate(steps, start=1)
        ],
        env_data={"url": site, "loginUrl": f"{site}/login", "greeting": "Welcome"},
        credentials=(CredentialValue(alias="admin", username="alice", secret=secret),),
        snippets=snippets,
    )

    outcome, events = await run(job)

    assert outcome.status == "pass", outcome.error
    lines = [event.message for event in events if isinstance(event, LogEvent)]
    assert "logged in as alice" in lines
    assert "checking order A-1001" in lines
    assert "password is ***" in lines
    assert not any(secret in line for line in lines)


MISTAKE_OR_ERROR = re.compile(
    r'^```(?:py title="(?P<mistake>Mistake)"|text title="(?P<error>Run error)")\n(?P<body>.*?)^```$',
    re.MULTILINE | re.DOTALL,
)
SAVE_WARNING = re.compile(r'"message": "(?P<message>line \d+: .*? is not awaited; add await)"')


def doc_mistakes() -> list[tuple[str, str]]:
    """Each *Mistake* block of the guide with the *Run error* block that follows it."""
    pairs: list[tuple[str, str]] = []
    mistake: str | None = None
    for block in MISTAKE_OR_ERROR.finditer(DOC.read_text()):
        if block["mistake"]:
            mistake = block["body"]
        elif mistake is not None:
            pairs.append((mistake, block["body"].strip()))
            mistake = None
    return pairs


async def test_the_guide_shows_its_mistakes_with_their_errors() -> None:
    mistakes = doc_mistakes()
    assert len(mistakes) >= 6
    assert any("was never awaited" in error for _, error in mistakes)
    assert any("did you mean" in error for _, error in mistakes)


async def test_every_mistake_in_the_step_code_guide_fails_with_the_message_it_shows(
    make_job: Callable[..., RunJob],
    run: Callable[[RunJob], Awaitable[tuple[RunFinished, list[RunEvent]]]],
) -> None:
    _, snippets = doc_examples()
    for code, error in doc_mistakes():
        job = make_job(code, snippets=snippets, env_name="local")

        outcome, _ = await run(job)

        assert outcome.status == "fail" and outcome.error is not None, code
        assert (outcome.error.kind.value, outcome.error.message) == ("error", error), code


async def test_the_save_warning_the_guide_shows_is_the_one_saving_answers() -> None:
    text = DOC.read_text()
    shown = SAVE_WARNING.search(text)
    assert shown is not None
    first, _ = doc_mistakes()[0]
    (found,) = unawaited_calls(first)
    assert shown["message"].replace('\\"', '"') == found.message
