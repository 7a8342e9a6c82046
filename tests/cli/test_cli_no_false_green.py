"""``scenariokit run`` never reports a check that did nothing as passed (CONTRACT §20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenariokit.cli import main

CARELESS = """\
kind: scenario
name: careless
steps:
  - title: open
    execCode: |
      await page.goto(helpers.getEnvUrl())
      expect(page.locator("h1")).to_have_text("Goodbye")
---
kind: scenario
name: only notes
steps:
  - title: todo
    execCode: "# check the basket here\\n"
---
kind: scenario
name: empty
"""


@pytest.mark.browser
def test_dropped_coroutines_and_nothing_to_run_fail_on_screen_and_in_the_report_and_warnings_print(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (files / "careless.scenario.yaml").write_text(CARELESS)

    status = main(
        ["run", str(files / "careless.scenario.yaml"), "--env", str(files / "local.env.yaml"),
         "--artifacts", str(files / "art"), "--workers", "1", "--html", str(files / "report")]
    )  # fmt: skip

    assert status == 1
    lines = capsys.readouterr().out.splitlines()
    call = 'expect(page.locator("h1")).to_have_text("Goodbye")'
    warning = f"warning: {files / 'careless.scenario.yaml'}: scenario 'careless' step 1: line 2: {call}"
    assert warning + " is not awaited; add await" in lines
    failed = f'step 1 "open": line 2: {call} was never awaited; add await'
    assert any(line.startswith("FAIL careless (") and line.endswith(failed) for line in lines), lines
    assert any(
        line.startswith("FAIL only notes (")
        and line.endswith("nothing to run: the scenario has no statements")
        for line in lines
    ), lines
    assert any(
        line.startswith("FAIL empty (") and line.endswith("nothing to run: the scenario has no steps")
        for line in lines
    ), lines
    assert 'in step 1 "open", line 2:' in lines and f"    {call}" in lines
    assert any("0 passed, 3 failed" in line for line in lines)
    pages = "".join(page.read_text() for page in (files / "report").rglob("*.html"))
    for shown in (
        "nothing to run: the scenario has no steps",
        "nothing to run: the scenario has no statements",
        "line 2: " + call.replace('"', "&#34;") + " was never awaited; add await",
    ):
        assert shown in pages, shown
