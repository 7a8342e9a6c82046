"""docs/pytest.md works as written: its tests/ folder, run by pytest, gives what the page says.

tests/home.scenario.yaml, tests/local.env.yaml and tests/test_home.py are the page's files, with the
sites replaced by a stand-in page on 127.0.0.1 (test_home.py serves its own page and is copied as is).
The commands are the page's lines, run in a subprocess with a clean environment and 80 columns.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import ROOT, code_block, code_blocks
from doc_commands import clean_env

pytestmark = pytest.mark.browser

PYTEST_MD = ROOT / "docs" / "pytest.md"
FILES_HEADING = "## Scenario files as tests"
DOC_SITE = "https://example.com"
DOC_LOCAL_SITE = "http://127.0.0.1:8000/"


@pytest.fixture
def project(tmp_path: Path, example_site: str) -> Path:
    """A folder holding the page's tests/ folder."""
    home, local = code_blocks(PYTEST_MD, after=FILES_HEADING, lang="yaml")[:2]
    assert home.count(DOC_SITE) == 1 and local.count(DOC_LOCAL_SITE) == 1
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "home.scenario.yaml").write_text(home.replace(DOC_SITE, example_site))
    (tests / "local.env.yaml").write_text(local.replace(DOC_LOCAL_SITE, example_site))
    (tests / "test_home.py").write_text(code_block(PYTEST_MD, after="## The `scenariokit` fixture"))
    return tmp_path


def pytest_line(startswith: str) -> list[str]:
    """The page's command line that starts with ``startswith``, run with this interpreter's pytest."""
    lines = code_blocks(PYTEST_MD, after=FILES_HEADING, lang="sh")[0].splitlines()
    found = [shlex.split(line, comments=True) for line in lines if line.startswith(startswith)]
    assert len(found) == 1 and found[0][0] == "pytest", found
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *found[0][1:]]


def run(args: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=folder, env=clean_env(COLUMNS="80"), capture_output=True, text=True, timeout=240
    )


def test_the_tests_folder_runs_as_the_page_says(project: Path) -> None:
    done = run([*pytest_line("pytest tests/   "), "-rA"], project)

    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert out.splitlines()[-1].startswith("=") and "1 failed, 4 passed" in out.splitlines()[-1]
    assert "PASSED tests/home.scenario.yaml::greets" in out
    assert "FAILED tests/home.scenario.yaml::says goodbye" in out
    for name in ("home_page_greets", "farewell_is_missing", "home_page_greets_async"):
        assert f"PASSED tests/test_home.py::test_the_{name}" in out
    # The failure report, as the page shows it, but for paths, ids and what "…" stands for.
    report = code_block(PYTEST_MD, after="### Failure reports", lang="text")
    lines = [line.rstrip() for line in out.splitlines()]
    varying = ("…", "locator resolved", "unexpected value", "screenshot: ")  # retries, paths, elisions
    expected = [line for line in report.splitlines() if not any(v in line for v in varying)]
    missing = [line for line in expected if not line.startswith("run ") and line.rstrip() not in lines]
    assert not missing, f"lines of the page not printed: {missing}\n{out}"
    assert "Traceback" not in out and "pytest_plugin.py" not in out  # no traceback of the plugin


def test_one_scenario_by_name_against_an_environment_file(project: Path, example_site: str) -> None:
    """Two of the page's lines in one run: ``-k "goodbye"`` and ``--scenariokit-env tests/local.env.yaml``.

    The file's own environment is pointed at a closed port, so only the environment file reaches the page.
    """
    home = project / "tests" / "home.scenario.yaml"
    home.write_text(home.read_text().replace(example_site, "http://127.0.0.1:9/"))
    args = pytest_line('pytest tests/home.scenario.yaml -k "goodbye"')
    env_file = pytest_line("pytest tests/ --scenariokit-env tests/local.env.yaml")[-2:]
    assert env_file == ["--scenariokit-env", "tests/local.env.yaml"]

    done = run([*args, *env_file], project)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 deselected" in done.stdout.splitlines()[-1], done.stdout
    assert "Actual value: Example Domain" in done.stdout  # the page local.env.yaml names was reached
