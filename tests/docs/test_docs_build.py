"""The documentation site builds with mkdocs, warnings as errors, and carries the hook reference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from doc_blocks import ROOT

import scenariokit


def test_the_site_builds_strictly_with_every_page_and_hook(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}

    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert built.returncode == 0, built.stderr
    pages = ("index", "embedding", "step-code", "rest", "mcp", "yaml", "pytest", "cli", "deployment")
    pages += ("performance",)
    for page in pages:
        assert (site / ("index.html" if page == "index" else f"{page}/index.html")).is_file(), page
    plugins_page = (site / "plugins" / "index.html").read_text(encoding="utf-8")
    hooks = [name for name in vars(scenariokit.get_plugin_manager().hook) if name.startswith("scenariokit_")]
    assert hooks and all(f'id="{hook}"' in plugins_page for hook in hooks)
    assert "<!-- hook-reference -->" not in plugins_page, "the marker was replaced by the reference"
