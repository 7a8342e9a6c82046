"""docs/cli.md's `scenariokit run` examples work as written, and print what the page shows.

checks/home.scenario.yaml and local.env.yaml are the page's files with their site replaced by a
stand-in page on 127.0.0.1; the commands are the page's lines, run by bash in a clean environment.
Standard output is a pipe, so the output is the plain one the page shows for CI logs.
"""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from doc_blocks import ROOT, code_blocks
from doc_commands import clean_env, without_durations

pytestmark = pytest.mark.browser

CLI_MD = ROOT / "docs" / "cli.md"
RUN_HEADING = "## `scenariokit run`"
DOC_SITE = "https://example.com"
DOC_LOCAL_SITE = "http://127.0.0.1:8000/"
TABLE = "┏┃┡│└"  # the first characters of the result table's lines


def text_block(after: str, index: int = 0) -> str:
    return code_blocks(CLI_MD, after=after, lang="text")[index]


def command(startswith: str) -> str:
    """The line of the page's `scenariokit run` examples that starts with ``startswith``."""
    lines = code_blocks(CLI_MD, after=RUN_HEADING, lang="sh")[0].splitlines()
    found = [line for line in lines if line.startswith(startswith)]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def folder(tmp_path: Path, example_site: str) -> Path:
    """The page's files, pointing at the stand-in page."""
    home, local = code_blocks(CLI_MD, after=RUN_HEADING, lang="yaml")[:2]
    assert home.count(DOC_SITE) == 1 and local.count(DOC_LOCAL_SITE) == 1
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "home.scenario.yaml").write_text(home.replace(DOC_SITE, example_site))
    (tmp_path / "local.env.yaml").write_text(local.replace(DOC_LOCAL_SITE, example_site))
    return tmp_path


def stable(line: str) -> bool:
    """Whether a line of the page's output is printed as is: not "…", Playwright's retries or table rows.

    Playwright words its call log by how often it found the locator before giving up, and the table's
    column widths follow the durations, so those lines are checked otherwise or not at all.
    """
    return not ("…" in line or "locator resolved" in line or "unexpected value" in line or line[:1] in TABLE)


def run(line: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=folder, env=clean_env(), capture_output=True, text=True, timeout=180
    )


def test_the_ci_example_prints_the_documented_output_and_junit_report(folder: Path) -> None:
    line = command("scenariokit run checks/*.yaml --workers 4 --junit-xml report.xml --artifacts run-files/")

    done = run(line, folder)

    assert done.returncode == 1, done.stderr  # "at least one scenario failed"
    out = [text.rstrip() for text in without_durations(done.stdout).splitlines()]
    # One plain line per finished scenario, in the order they finish: compare them as a set.
    plain = [text.rstrip() for text in without_durations(text_block("### Output")).splitlines()]
    assert sorted(out[:2]) == sorted(plain)
    # The end of the output, as the page shows it, but for the run id and what "…" stands for.
    tail = [text.rstrip() for text in without_durations(text_block("### Output", 1)).splitlines()]
    run_id = re.search(r"run-files/([0-9a-f-]{36})/step-2\.png", done.stdout)
    assert run_id is not None, done.stdout
    documented_id = re.search(r"run-files/([0-9a-f-]{36})/", "\n".join(tail))
    assert documented_id is not None
    expected = [text.replace(documented_id[1], run_id[1]) for text in tail if stable(text)]
    missing = [text for text in expected if text not in out]
    assert not missing, f"lines of the page not printed: {missing}\n{done.stdout}"
    assert any(re.match(r"┃ result ┃ scenario +┃ file +┃ +time ┃ failing step +┃$", text) for text in out)
    for result, name in (("PASS", "greets"), ("FAIL", "says goodbye")):  # table rows: widths vary
        assert any(re.match(rf"│ {result} +│ {name} +│", text) for text in out), (result, done.stdout)
    assert out[-2:] == ["1 passed, 1 failed in T s", "JUnit XML: report.xml"]
    assert (folder / "run-files" / run_id[1] / "step-2.png").is_file()

    documented = code_blocks(CLI_MD, after="### JUnit XML", lang="xml")[0]
    report = ET.parse(folder / "report.xml").getroot()
    assert report.tag == "testsuites"
    assert {k: report.attrib[k] for k in ("name", "tests", "failures", "errors", "skipped")} == dict(
        re.findall(r'(name|tests|failures|errors|skipped)="([^"]*)"', documented.splitlines()[1])
    )
    suite = report.find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("file")) == ("home", "checks/home.scenario.yaml")
    attributes = ("classname", "name", "file", "line")
    cases = [tuple(case.get(name) for name in attributes) for case in suite.findall("testcase")]
    testcase = r'<testcase classname="(\w+)" name="([^"]+)" file="([^"]+)" time="[^"]+" line="(\d+)"'
    assert sorted(cases) == sorted(re.findall(testcase, documented))
    goodbye = next(c for c in suite.iter("testcase") if c.get("name") == "says goodbye")
    failure = goodbye.find("failure")
    assert failure is not None and failure.get("type") == "assertion"
    assert failure.get("message") == (
        "step 2 \"look for the farewell\": Locator expected to have text 'Goodbye' (line 2)"
    )
    assert (failure.text or "").startswith("scenario 'says goodbye' failed (assertion)\n")
    properties = {p.get("name"): p.get("value") for p in goodbye.iter("property")}
    assert properties == {"run_id": run_id[1], "screenshot": f"run-files/{run_id[1]}/step-2.png"}
    system_out = goodbye.findtext("system-out") or ""
    assert system_out.startswith('info: looking for the farewell\nerror: step 2 ("look for the farewell")')
    assert system_out.endswith(f"[[ATTACHMENT|run-files/{run_id[1]}/step-2.png]]")


def test_an_environment_file_and_an_unknown_name(folder: Path) -> None:
    by_file = run(command("scenariokit run checks/home.scenario.yaml --env local.env.yaml"), folder)
    assert by_file.returncode == 1, by_file.stderr
    assert "PASS greets (checks/home.scenario.yaml)" in by_file.stdout
    assert (folder / "artifacts").is_dir()  # the default --artifacts

    unknown = run("scenariokit run checks/home.scenario.yaml --env staging", folder)
    assert unknown.returncode == 2 and unknown.stdout == ""
    documented = re.search(r"e\.g\. `(scenariokit run: [^`]+)`", CLI_MD.read_text(encoding="utf-8"))
    assert documented is not None
    assert unknown.stderr.strip() == documented[1]
