"""mkdocs hook: the plugin hook reference, generated from ``scenariokit/plugins/hookspecs.py`` at build time.

A page holding the line ``<!-- hook-reference -->`` gets, in its place, every hook specification of
that module: grouped under the module's lifecycle banners (``# --- storage ---``), each with its
signature, whether the first answer wins, and its docstring. Nothing is copied by hand, so the
reference cannot drift from the code; ``tests/docs`` checks that every hook has an entry.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any, NamedTuple

MARKER = "<!-- hook-reference -->"
_BANNER = re.compile(r"^# -{3} (?P<title>.+?) -+$")


class HookEntry(NamedTuple):
    """One hook specification as the reference shows it."""

    name: str
    section: str
    signature: str
    firstresult: bool
    doc: str


def hookspecs_source() -> str:
    """The text of ``scenariokit/plugins/hookspecs.py`` of the installed scenariokit."""
    spec = importlib.util.find_spec("scenariokit.plugins.hookspecs")
    if spec is None or spec.origin is None:
        raise RuntimeError("scenariokit is not installed: cannot render the hook reference")
    return Path(spec.origin).read_text(encoding="utf-8")


def _hookspec_decorator(node: ast.FunctionDef) -> ast.expr | None:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id == "hookspec":
            return decorator
    return None


def hook_entries(source: str) -> list[HookEntry]:
    """Every ``@hookspec`` function of the module source, in source order."""
    banners = {
        number: match["title"].strip()
        for number, line in enumerate(source.splitlines(), start=1)
        if (match := _BANNER.match(line))
    }
    entries = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        decorator = _hookspec_decorator(node)
        if decorator is None:
            continue
        above = [line for line in banners if line < node.lineno]
        section = banners[max(above)] if above else "hooks"
        firstresult = isinstance(decorator, ast.Call) and any(
            k.arg == "firstresult" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in decorator.keywords
        )
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        entries.append(
            HookEntry(
                name=node.name,
                section=section,
                signature=f"def {node.name}({ast.unparse(node.args)}){returns}",
                firstresult=firstresult,
                doc=ast.get_docstring(node) or "",
            )
        )
    return entries


def render_reference(source: str) -> str:
    """The Markdown of the hook reference."""
    out: list[str] = []
    section = None
    for entry in hook_entries(source):
        if entry.section != section:
            section = entry.section
            out += [f"### {section.capitalize()}", ""]
        out += [f"#### `{entry.name}`", "", "```python", entry.signature, "```", ""]
        if entry.firstresult:
            out += [
                "*First result wins*: plugins are asked in turn until one answers something other "
                "than `None`.",
                "",
            ]
        out += [entry.doc, ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    """mkdocs event: put the generated reference where a page holds the marker."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_reference(hookspecs_source()))
