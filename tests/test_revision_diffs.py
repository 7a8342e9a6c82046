"""Diffs of two revisions: steps matched by id, a move read as a move, a shift not listed at all."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from scenariokit.domain.browser import BrowserSettings
from scenariokit.domain.model import Scenario, Step
from scenariokit.domain.revisions import (
    Origin,
    Revision,
    StepChangeKind,
    diff_contents,
    fields_document,
    new_revision,
)


def _revision(number: int, steps: list[Step], **fields: Any) -> Revision:
    return new_revision(Scenario(name="checkout", steps=tuple(steps), revision=number, **fields), Origin())


def _steps(*codes: str) -> list[Step]:
    return [Step(exec_code=code, order=i) for i, code in enumerate(codes, start=1)]


def _at(steps: list[Step], *order: int) -> list[Step]:
    return [attrs.evolve(steps[i], order=n) for n, i in enumerate(order, start=1)]


def test_a_step_moved_to_the_front_is_one_change_and_the_others_only_shifted() -> None:
    a, b, c = _steps("a = 1", "b = 1", "c = 1")
    older = _revision(1, [a, b, c])
    newer = _revision(2, _at([a, b, c], 2, 0, 1))
    diff = diff_contents(uuid.uuid4(), older, newer)
    [moved] = diff.steps
    assert (moved.step_id, moved.change, moved.moved, moved.from_order, moved.order) == (
        c.id,
        StepChangeKind.CHANGED,
        True,
        3,
        1,
    )
    assert "-order: 3\n+order: 1\n" in moved.diff and "execCode" in moved.diff


def test_an_inserted_step_is_added_and_the_steps_after_it_are_not_listed() -> None:
    a, b = _steps("a = 1", "b = 1")
    new = Step(exec_code="await page.goto('/')\nprint('in')", order=1, title="open")
    older = _revision(1, [a, b])
    newer = _revision(2, [new, attrs.evolve(a, order=2), attrs.evolve(b, order=3)])
    diff = diff_contents(uuid.uuid4(), older, newer)
    [added] = diff.steps
    assert (added.change, added.order, added.title) == (StepChangeKind.ADDED, 1, "open")
    assert added.diff.startswith("--- /dev/null\n+++ revision 2 step 1\n")
    assert "+  await page.goto('/')\n+  print('in')\n" in added.diff


def test_removed_and_edited_steps_and_changed_fields() -> None:
    a, b, c = _steps("a = 1", "b = 1", "c = 1")
    older = _revision(4, [a, b, c], description="old")
    edited = attrs.evolve(c, order=2, exec_code="c = 2", title="third")
    newer = _revision(7, [a, edited], description="new", timeout_seconds=60.0)
    diff = diff_contents(uuid.uuid4(), older, newer)
    assert (diff.from_number, diff.to_number) == (4, 7)
    assert diff.fields == {"description": ("old", "new"), "timeoutSeconds": (None, 60.0)}
    changed, removed = diff.steps
    assert (changed.step_id, changed.change, changed.moved) == (c.id, StepChangeKind.CHANGED, False)
    assert '-title: null\n+title: "third"\n' in changed.diff and "-  c = 1\n+  c = 2\n" in changed.diff
    assert (removed.step_id, removed.change, removed.order) == (b.id, StepChangeKind.REMOVED, 2)
    assert removed.diff.endswith(
        "+++ /dev/null\n@@ -1,4 +0,0 @@\n-title: null\n-timeoutSeconds: null\n-execCode:\n-  b = 1\n"
    )


def test_two_revisions_of_the_same_content_differ_in_nothing() -> None:
    steps = _steps("a = 1")
    older = _revision(1, steps)
    newer = _revision(5, steps)
    assert diff_contents(uuid.uuid4(), older, newer).unchanged
    assert older.info.content_hash == newer.info.content_hash


def test_browser_settings_are_content_a_diff_lists_and_unset_ones_leave_the_hash_as_it_was() -> None:
    steps = _steps("await page.goto(helpers.getEnvUrl())")
    plain = _revision(1, steps)
    mobile = _revision(2, steps, browser=BrowserSettings(device="Pixel 7", locale="de-DE"))

    assert "browser" not in fields_document(plain.content)  # hashes of revisions made before settings hold
    diff = diff_contents(uuid.uuid4(), plain, mobile)
    assert diff.fields == {"browser": (None, {"device": "Pixel 7", "locale": "de-DE"})}
    assert plain.info.content_hash != mobile.info.content_hash
    restored = mobile.as_scenario(Scenario(name="checkout"))
    assert restored.browser == BrowserSettings(device="Pixel 7", locale="de-DE")
