"""Reading the code blocks of the documentation, so tests run them exactly as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)


def code_blocks(path: Path, *, after: str, lang: str) -> list[str]:
    """Every ``lang`` code block that follows the text ``after`` (a heading or a marker comment), in order."""
    text = path.read_text(encoding="utf-8")
    start = text.index(after)
    return [match["code"] for match in _FENCE.finditer(text, start) if match["lang"] == lang]


def code_block(path: Path, *, after: str, lang: str = "python") -> str:
    """The first ``lang`` code block that follows the text ``after`` (a heading or a marker comment)."""
    blocks = code_blocks(path, after=after, lang=lang)
    if not blocks:
        raise LookupError(f"no {lang} block after {after!r} in {path}")
    return blocks[0]
