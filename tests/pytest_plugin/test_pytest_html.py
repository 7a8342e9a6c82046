"""The pytest plugin's report: the failure names the screenshot and, when tracing, the trace;
``--scenariokit-html DIR`` writes the same pages as ``scenariokit run --html``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


@pytest.mark.browser
def test_a_failure_names_its_screenshot_and_trace_and_the_html_report_is_written(
    scenario_files: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCENARIOKIT_TRACE", "on-failure")
    artifacts = tmp_path / "artifacts"
    junit = tmp_path / "junit.xml"

    result = scenario_files.runpytest_inprocess(
        "--scenariokit-env", "local", "--scenariokit-artifacts", str(artifacts),
        "--scenariokit-html", "report", f"--junit-xml={junit}", "home.scenario.yaml",
    )  # fmt: skip

    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"screenshot: {artifacts}*step-2.png",
            f"trace: {artifacts}*trace.zip (playwright show-trace *trace.zip)",
            "scenariokit HTML report: *report*index.html",
        ]
    )
    trace = next(line for line in result.stdout.lines if line.startswith("trace: ")).split()[1]
    assert Path(trace).is_file()
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    properties = {prop.get("name"): prop.get("value") for prop in cases["says goodbye"].iter("property")}
    assert properties["trace"] == trace and properties["screenshot"].endswith("step-2.png")

    report = scenario_files.path / "report"
    index = (report / "index.html").read_text()
    assert "greets" in index and "says goodbye" in index
    pages = list((report / "runs").glob("*.html"))
    assert len(pages) == 2
    failed = next(page.read_text() for page in pages if "says goodbye" in page.read_text())
    assert 'id="failed-step"' in failed and "look for the farewell" in failed
    assert list((report / "files").glob("*/step-2.png")) and list((report / "files").glob("*/trace.zip"))
