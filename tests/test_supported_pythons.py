"""What the package promises about interpreters is what the test suite runs on."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def supported_by_the_suite() -> tuple[str, ...]:
    """``noxfile.SUPPORTED``: the versions ``nox -s tests`` and ``nox -s platform`` run on."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "SUPPORTED" for t in targets):
                assert node.value is not None
                return tuple(ast.literal_eval(node.value))
    raise AssertionError("noxfile.py defines no SUPPORTED")


def test_requires_python_and_classifiers_name_exactly_the_versions_the_suite_runs_on() -> None:
    versions = supported_by_the_suite()
    low, high = versions[0], versions[-1]
    upper = f"3.{int(high.split('.')[1]) + 1}"
    for pyproject in [ROOT / "pyproject.toml", *sorted(ROOT.glob("plugins/*/pyproject.toml"))]:
        project = tomllib.loads(pyproject.read_text())["project"]
        assert project["requires-python"] == f">={low},<{upper}", pyproject
        classified = [
            c.rsplit(" ", 1)[1]
            for c in project["classifiers"]
            if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
        ]
        assert classified == list(versions), pyproject
        assert "Operating System :: POSIX :: Linux" in project["classifiers"], pyproject
