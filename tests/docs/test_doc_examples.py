"""The Python examples of README.md and docs/embedding.md run as written, against a page on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from doc_blocks import ROOT, code_block

pytestmark = pytest.mark.browser  # every test here runs scenarios in Chromium


def run_example(code: str, name: str, site: str, monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Execute an example as a script would, in ``folder``, with SITE_URL naming the test page."""
    monkeypatch.setenv("SITE_URL", site)
    monkeypatch.chdir(folder)
    exec(compile(code, name, "exec"), {"__name__": "__main__"})


@pytest.mark.platform
def test_the_readme_python_example_runs_as_written(
    example_site: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = code_block(ROOT / "README.md", after="## Use it from Python")

    run_example(code, "README.md", example_site, monkeypatch, tmp_path)

    assert capsys.readouterr().out.splitlines() == ["pass [('open', 'pass'), ('heading', 'pass')]"]
    assert (tmp_path / "checks.db").is_file()


def test_the_embedding_guide_example_runs_as_written(
    example_site: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = code_block(ROOT / "docs" / "embedding.md", after="<!-- docs-example: embedding -->")

    run_example(code, "docs/embedding.md", example_site, monkeypatch, tmp_path)

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("passed in ")
    assert lines[1] == "failed: assertion Locator expected to have text 'Goodbye' (line 1)"
    assert lines[2:4] == ["steps: [(1, 'pass'), (2, 'fail')]", "log: ['Example Domain']"]
    screenshot = Path(lines[4].removeprefix("screenshot: "))
    assert (tmp_path / screenshot).read_bytes().startswith(b"\x89PNG")


def test_the_authoring_guide_example_runs_as_written(
    example_site: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = code_block(ROOT / "docs" / "authoring.md", after="<!-- docs-example: authoring -->")

    run_example(code, "docs/authoring.md", example_site, monkeypatch, tmp_path)

    assert capsys.readouterr().out.splitlines() == ["1 ok", "2 failed: assertion", "3 ok", "pass 2 steps"]


def test_the_settings_keywords_example_serves_as_its_variables_would(monkeypatch: pytest.MonkeyPatch) -> None:
    import scenariokit_server
    from scenariokit_server import Settings

    code = code_block(ROOT / "docs" / "rest.md", after="<!-- docs-example: settings-keywords -->")
    served: list[Settings] = []
    monkeypatch.setattr(scenariokit_server, "run_server", served.append)  # where it would serve for good
    for variable in ("SCENARIOKIT_WORKERS", "SCENARIOKIT_BROWSER_ARGS"):
        monkeypatch.delenv(variable, raising=False)

    exec(compile(code, "docs/rest.md", "exec"), {"__name__": "__main__"})

    variables = {"SCENARIOKIT_WORKERS": "2", "SCENARIOKIT_BROWSER_ARGS": "--disable-software-rasterizer"}
    assert served == [Settings.from_env({**os.environ, **variables})]
