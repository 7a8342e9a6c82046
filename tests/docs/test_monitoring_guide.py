"""The example of docs/monitoring.md runs as written and prints what the page says it prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_blocks import ROOT, code_block, code_blocks

pytestmark = pytest.mark.browser


def test_the_retries_example_runs_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = ROOT / "docs" / "monitoring.md"
    code = code_block(guide, after="<!-- docs-example: retries -->")
    monkeypatch.chdir(tmp_path)

    exec(compile(code, "docs/monitoring.md", "exec"), {"__name__": "__main__"})

    printed = code_blocks(guide, after="<!-- docs-example: retries -->", lang="text")[0]
    assert capsys.readouterr().out == printed
