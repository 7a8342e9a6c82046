"""docs/plugins.md's plugin works as written outside the suite: packaged and installed, and tried unpackaged.

The distribution is the page's two files (the module and its pyproject.toml), installed with pip into a
folder of its own (``--target``, so this virtualenv stays as it is) that ``PYTHONPATH`` then names: the
``scenariokit`` command must find it through its entry point. The try-out script runs as a script
beside the module, as the page says.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import ROOT, code_block, code_blocks
from doc_commands import BIN, clean_env

pytestmark = pytest.mark.browser

PLUGINS_MD = ROOT / "docs" / "plugins.md"
CLI_MD = ROOT / "docs" / "cli.md"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def plugin_module() -> str:
    return code_block(PLUGINS_MD, after="<!-- docs-example: plugin -->")


def test_the_unpackaged_try_out_prints_the_plugin_lines(tmp_path: Path) -> None:
    (tmp_path / "scenariokit_run_log.py").write_text(plugin_module())
    try_out = code_block(PLUGINS_MD, after="<!-- docs-example: try-plugin -->")
    (tmp_path / "try_run_log.py").write_text(try_out)

    done = subprocess.run(
        [sys.executable, "try_run_log.py"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    # only the plugin's logger speaks, after what the pool could not give the workers here (as an
    # ordinary user: control groups, both zygotes), which the docs say warns first
    noted = "scenariokit.runner.parent.executor: left out: "
    lines = [line for line in done.stderr.splitlines() if not line.startswith(noted)]
    assert len(lines) == 2, done.stderr
    assert re.fullmatch(rf"scenariokit_run_log: run {UUID} of 'says hi' started", lines[0])
    assert re.fullmatch(rf"scenariokit_run_log: run {UUID} of 'says hi' finished: pass in \d+ ms", lines[1])
    assert (tmp_path / "checks.db").is_file()


@pytest.mark.skipif(
    importlib.util.find_spec("setuptools") is None or importlib.util.find_spec("pip") is None,
    reason="building the plugin here needs pip and setuptools in this virtualenv (no download)",
)
def test_the_installed_plugin_logs_the_runs_of_scenariokit_run(tmp_path: Path, example_site: str) -> None:
    distribution = tmp_path / "scenariokit-run-log"
    distribution.mkdir()
    (distribution / "scenariokit_run_log.py").write_text(plugin_module())
    pyproject = code_block(PLUGINS_MD, after="## Write a plugin", lang="toml")
    (distribution / "pyproject.toml").write_text(pyproject)
    site = tmp_path / "site"
    offline = ["--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", *offline, "--target", str(site), str(distribution)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert installed.returncode == 0, installed.stderr
    checks = tmp_path / "checks"
    checks.mkdir()
    home = code_blocks(CLI_MD, after="## `scenariokit run`", lang="yaml")[0]
    (checks / "home.scenario.yaml").write_text(home.replace("https://example.com", example_site))

    done = subprocess.run(
        [str(BIN / "scenariokit"), "run", "checks/home.scenario.yaml"],
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(site)),
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert done.returncode == 1, done.stdout + done.stderr  # says goodbye fails, as on the CLI page
    logged = [line for line in done.stderr.splitlines() if line.startswith("INFO scenariokit_run_log:")]
    layout, log = code_blocks(PLUGINS_MD, after="## Write a plugin", lang="text")[:2]
    assert layout.split() == ["scenariokit-run-log/", "pyproject.toml", "scenariokit_run_log.py"]
    documented = log.splitlines()
    assert len(logged) == len(documented) == 4, done.stderr
    assert sorted(map(shape, logged)) == sorted(map(shape, documented))  # runs start and end in any order


def shape(line: str) -> str:
    """A log line without its run id and duration."""
    return re.sub(r"in \d+ ms", "in N ms", re.sub(UUID, "ID", line))
