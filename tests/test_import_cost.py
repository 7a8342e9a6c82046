"""``import scenariokit`` and the pytest plugin (loaded by every pytest session) stay light.

Playwright and SQLAlchemy are imported where they are used, not at import: a fresh interpreter that
imports the package or the plugin must not have them in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import scenariokit
from scenariokit import pytest_plugin
from scenariokit.local import scenario_files

HEAVY = ("playwright", "sqlalchemy")


def _loaded_after(statement: str) -> list[str]:
    probe = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return modules


@pytest.mark.parametrize("statement", ["import scenariokit", "import scenariokit.pytest_plugin"])
def test_importing_the_package_or_its_pytest_plugin_loads_neither_playwright_nor_sqlalchemy(
    statement: str,
) -> None:
    loaded = _loaded_after(statement)
    heavy = [name for name in loaded if name.split(".")[0] in HEAVY]
    assert heavy == [], f"{statement!r} imported {heavy[:5]}"


def test_the_public_names_still_resolve_on_first_use() -> None:
    for name in scenariokit.__all__:
        assert getattr(scenariokit, name) is not None, name
    assert set(scenariokit.__all__) <= set(dir(scenariokit))
    with pytest.raises(AttributeError):
        _ = scenariokit.no_such_name  # type: ignore[attr-defined]


def test_the_plugin_collects_the_files_scenario_files_names() -> None:
    assert pytest_plugin._SCENARIO_FILE_SUFFIXES == scenario_files.SCENARIO_FILE_SUFFIXES
