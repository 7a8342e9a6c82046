"""Fixtures for ``scenariokit run``: a page on 127.0.0.1 and scenario files that run against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from served_pages import serve_pages

PAGE = b"<!doctype html><title>Home</title><h1>Hello</h1>"

PASSING = """\
# environments
---
kind: environment
name: local
data:
  url: {url}
# scenarios
---
kind: scenario
revision: 7
name: greets
steps:
  - title: open the home page
    execCode: |
      await page.goto(helpers.getEnvUrl())
      await expect(page.locator("h1")).to_have_text("Hello")
"""

#: One scenario whose assertion fails, one whose code raises; no environment.
MIXED = """\
kind: scenario
name: says goodbye
steps:
  - title: open
    execCode: await page.goto(helpers.getEnvUrl())
  - title: look for the farewell
    execCode: |
      print("looking for the farewell")
      await expect(page.locator("h1")).to_have_text("Goodbye", timeout=500)
---
kind: scenario
name: crashes
steps:
  - title: divide
    execCode: print(1 / 0)
"""


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    """The page's URL, on a free port of 127.0.0.1."""
    with serve_pages({"/": PAGE}) as base:
        yield f"{base}/"


@pytest.fixture
def files(tmp_path: Path, site_url: str) -> Path:
    """A folder with passing.scenario.yaml, mixed.scenario.yaml and local.env.yaml (the site's URL)."""
    (tmp_path / "passing.scenario.yaml").write_text(PASSING.format(url=site_url))
    (tmp_path / "mixed.scenario.yaml").write_text(MIXED)
    (tmp_path / "local.env.yaml").write_text(f"kind: environment\nname: local\ndata:\n  url: {site_url}\n")
    return tmp_path
