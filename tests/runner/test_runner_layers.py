"""The runner's rooms keep their direction: what runs in a worker never reaches for the parent's side."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import scenariokit.runner

RUNNER = Path(scenariokit.runner.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name a file imports, at any depth of the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("room", ["worker", "confinement"])
def test_worker_and_confinement_never_import_the_parent_side(room: str) -> None:
    offenders = {
        f"{path.relative_to(RUNNER)}: {name}"
        for path in (RUNNER / room).glob("*.py")
        for name in imported_modules(path)
        if name.startswith("scenariokit.runner.parent")
    }
    assert not offenders


def test_every_runner_module_lives_in_a_room() -> None:
    loose = sorted(
        path.name for path in RUNNER.glob("*.py") if path.name not in {"__init__.py", "protocol.py"}
    )
    assert loose == []
