"""The Python example of docs/revisions.md runs as written and prints what the page says it prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_blocks import ROOT, code_block, code_blocks

DOC = ROOT / "docs" / "revisions.md"


def test_the_revisions_guide_example_prints_what_it_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = code_block(DOC, after="<!-- docs-example: revisions -->")
    printed = code_blocks(DOC, after="It prints:", lang="")[0]
    monkeypatch.chdir(tmp_path)

    exec(compile(code, "docs/revisions.md", "exec"), {"__name__": "__main__"})

    assert capsys.readouterr().out == printed


def test_the_revisions_guide_is_in_the_navigation() -> None:
    assert "revisions.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
