"""Meta-tests: every hook has an entry in the generated reference and a test that calls it.

The reference is rendered from ``src/scenariokit/plugins/hookspecs.py`` by ``docs/hooks.py`` (an mkdocs hook);
a hook counts as tested when some test function, in ``tests/`` or in a plugin's ``tests/``, is named
``test_hook_<hook name without the scenariokit_ prefix>…`` (datasette's rule).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import types

import pytest
from doc_blocks import ROOT

import scenariokit

PREFIX = "scenariokit_"


def hookspec_names() -> list[str]:
    """The hooks scenariokit specifies, from a plugin manager (not from the reference's own parsing)."""
    manager = scenariokit.get_plugin_manager(load_entry_points=False)
    return sorted(name for name in vars(manager.hook) if name.startswith(PREFIX))


@functools.cache
def docs_hooks_module() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("scenariokit_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def suite_test_names() -> frozenset[str]:
    """Every test function name in the suite and in the plugins' tests."""
    names: set[str] = set()
    for path in [*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("plugins/*/tests/**/test_*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return frozenset(names)


def test_the_hooks_are_found() -> None:
    assert len(hookspec_names()) >= 7


@pytest.mark.parametrize("hook", hookspec_names())
def test_every_hook_has_an_entry_in_the_generated_reference(hook: str) -> None:
    hooks = docs_hooks_module()
    reference = hooks.render_reference(hooks.hookspecs_source())

    assert f"#### `{hook}`\n\n```python\ndef {hook}(" in reference


@pytest.mark.parametrize("hook", hookspec_names())
def test_every_hook_has_a_test_that_calls_it(hook: str) -> None:
    wanted = f"test_hook_{hook.removeprefix(PREFIX)}"

    assert any(name.startswith(wanted) for name in suite_test_names()), f"no test named {wanted}…"


def test_the_plugins_page_holds_the_generated_reference() -> None:
    hooks = docs_hooks_module()

    assert hooks.MARKER in (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
