"""docs/reports.md: the local report example works as written, and the page shows what it says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from doc_blocks import ROOT, code_blocks
from doc_commands import clean_env

REPORTS_MD = ROOT / "docs" / "reports.md"
CLI_MD = ROOT / "docs" / "cli.md"


def test_the_page_is_in_the_nav_and_its_screenshots_exist() -> None:
    text = REPORTS_MD.read_text(encoding="utf-8")
    assert "reports.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for image in ("report-run.png", "report-index.png", "trace-viewer.png"):
        assert f"(images/{image})" in text
        assert (ROOT / "docs" / "images" / image).read_bytes().startswith(b"\x89PNG")
    for page in ("rest.md", "pytest.md", "cli.md"):
        assert "reports.md" in (ROOT / "docs" / page).read_text(encoding="utf-8"), page


@pytest.mark.browser
def test_the_local_report_example_writes_the_documented_folder(tmp_path: Path, example_site: str) -> None:
    home, local = code_blocks(CLI_MD, after="## `scenariokit run`", lang="yaml")[:2]
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "home.scenario.yaml").write_text(home.replace("https://example.com", example_site))
    (tmp_path / "local.env.yaml").write_text(local.replace("http://127.0.0.1:8000/", example_site))
    (line,) = code_blocks(REPORTS_MD, after="## Reports of local runs", lang="sh")[0].splitlines()

    done = subprocess.run(
        ["bash", "-c", line], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180
    )

    assert done.returncode == 1, done.stderr  # says goodbye fails, as the CLI page shows
    report = tmp_path / "report"
    assert "HTML report: report/index.html" in done.stdout
    index = (report / "index.html").read_text(encoding="utf-8")
    assert "greets" in index and "says goodbye" in index
    assert len(list((report / "runs").glob("*.html"))) == 2
    assert len(list((report / "files").glob("*/step-2.png"))) == 1
    assert len(list((report / "files").glob("*/trace.zip"))) == 1
    assert sorted(path.name for path in (report / "assets").iterdir()) == ["report.css", "report.js"]
    failed = next(
        page.read_text(encoding="utf-8")
        for page in (report / "runs").glob("*.html")
        if "says goodbye" in page.read_text(encoding="utf-8")
    )
    assert "playwright show-trace report/files/" in failed
