"""The checks of step and snippet code on save are remembered by the code's text (a dashboard's save
sends every step again): the answers are the same remembered or not, each names its own field, and
long code is checked each time rather than kept."""

from __future__ import annotations

import attrs
import pytest

from scenariokit.domain import code as code_checks
from scenariokit.domain.code import (
    REMEMBERED_CODE_CHARS,
    unawaited_calls,
    valid_snippet_code,
    valid_step_code,
)
from scenariokit.domain.model import FieldError


def attribute(name: str) -> attrs.Attribute[str]:
    return attrs.Attribute(  # type: ignore[call-arg]
        name=name, default=None, validator=None, repr=True, cmp=None, hash=None, init=True, inherited=False
    )


@pytest.mark.parametrize("field", ["exec_code", "setup_code"])
def test_a_remembered_refusal_names_the_field_it_is_given(field: str) -> None:
    broken = "await page.click('#go'"
    for _ in range(2):  # the second answer comes from what was remembered
        with pytest.raises(FieldError) as refused:
            valid_step_code(None, attribute(field), broken)
        assert str(refused.value) == (
            f"{code_checks.camel(field)}: is not valid Python: '(' was never closed (line 1)"
        )


def test_step_and_snippet_code_are_remembered_apart() -> None:
    """``return`` is a snippet's (a function body's) but not a step's: one text, two verdicts."""
    text = "return 1  # remembered apart"
    valid_snippet_code(None, attribute("code"), text)
    with pytest.raises(FieldError, match="'return' outside function"):
        valid_step_code(None, attribute("exec_code"), text)
    valid_snippet_code(None, attribute("code"), text)  # remembered as valid, still


def test_unawaited_calls_answer_a_list_of_their_own_each_time() -> None:
    text = "page.goto('http://127.0.0.1:1/')\nawait page.click('a')  # remembered list"
    first = unawaited_calls(text)
    first.clear()
    again = unawaited_calls(text)
    assert [(found.line, found.call) for found in again] == [(1, "page.goto('http://127.0.0.1:1/')")]


def test_long_code_is_checked_each_time_not_kept() -> None:
    remembered = code_checks._unawaited_calls.cache_info  # type: ignore[attr-defined]
    long_text = "page.goto('x')\n" + "# padding\n" * (REMEMBERED_CODE_CHARS // 10)
    assert len(long_text) > REMEMBERED_CODE_CHARS
    before = remembered()
    for _ in range(2):
        assert [found.line for found in unawaited_calls(long_text)] == [1]
    assert (remembered().hits, remembered().misses) == (before.hits, before.misses)  # never looked up
    short_text = f"page.goto('y')  # {len(long_text)}"
    for _ in range(2):
        assert [found.line for found in unawaited_calls(short_text)] == [1]
    assert (remembered().hits, remembered().misses) == (before.hits + 1, before.misses + 1)
