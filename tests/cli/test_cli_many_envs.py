"""``scenariokit run --env a --env b``: each scenario against each environment, a row per pair."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from scenariokit.cli import main
from served_pages import serve_pages

pytestmark = pytest.mark.browser


def test_each_file_runs_against_each_environment_with_a_row_per_pair(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = files / "junit.xml"
    with serve_pages({"/": b"<h1>Down for maintenance</h1>"}) as down:
        (files / "down.env.yaml").write_text(f"kind: environment\nname: down\ndata:\n  url: {down}/\n")
        status = main(
            ["run", str(files / "passing.scenario.yaml"),
             "--env", "local", "--env", str(files / "down.env.yaml"),
             "--junit-xml", str(report), "--artifacts", str(files / "art"), "--workers", "2"]
        )  # fmt: skip
    shown = capsys.readouterr().out
    assert status == 1, shown
    assert "PASS greets [local] revision 7 (" in shown
    assert f"FAIL greets [{files / 'down.env.yaml'}] revision 7 (" in shown
    assert "environment" in shown and "1 passed, 1 failed" in shown
    cases = {case.get("name"): case for case in ET.parse(report).getroot().iter("testcase")}
    assert set(cases) == {"greets [local]", f"greets [{files / 'down.env.yaml'}]"}
    assert cases["greets [local]"].find("failure") is None


def test_one_env_keeps_the_report_as_it_was(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        ["run", str(files / "passing.scenario.yaml"), "--env", "local", "--artifacts", str(files / "art"),
         "--workers", "1"]
    )  # fmt: skip
    shown = capsys.readouterr().out
    assert status == 0 and "PASS greets revision 7 (" in shown and "[local]" not in shown
