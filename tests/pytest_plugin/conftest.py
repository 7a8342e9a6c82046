"""Fixtures for the pytest plugin's tests: a site on 127.0.0.1 and scenario files that run against it.

The site is served from a thread, so browsers in other processes (the runner's workers, pytest-xdist
workers) reach it while a test waits for an inner pytest run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from served_pages import serve_pages

HOME = b"<!doctype html><title>Home</title><h1>Hello</h1>"

#: ``{url}`` is the site; two environments, so a scenario without one needs ``--scenariokit-env``.
SCENARIOS = """\
# environments
---
kind: environment
id: 0b6f3c1e-5d2a-4c8e-9f1b-2a7d4e6c8b10
name: local
data:
  url: {url}
---
kind: environment
name: elsewhere
data:
  url: http://127.0.0.1:9/
# scenarios
---
kind: scenario
name: greets
steps:
  - title: open the home page
    execCode: |
      await page.goto(helpers.getEnvUrl())
      await expect(page.locator("h1")).to_have_text("Hello")
---
kind: scenario
name: says goodbye
steps:
  - title: open
    execCode: await page.goto(helpers.getEnvUrl())
  - title: look for the farewell
    execCode: |
      print("looking for the farewell")
      await expect(page.locator("h1")).to_have_text("Goodbye", timeout=500)
  - title: never runs
    execCode: print("never")
"""

#: A scenario whose step raises, bound to its own (only) environment.
CRASHES = """\
# environments
---
kind: environment
name: local
data:
  url: {url}
# scenarios
---
kind: scenario
name: crashes
steps:
  - title: divide
    execCode: |
      total = 1
      total = total / 0
"""

#: A scenario file with no environments at all: with ``--scenariokit-env local`` its test errors.
NO_ENVIRONMENT = """\
kind: scenario
name: homeless
steps:
  - execCode: print("never runs")
"""


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    """The site's base URL, on a free port of 127.0.0.1."""
    with serve_pages({"/": HOME}) as base:
        yield f"{base}/"


@pytest.fixture
def scenario_files(pytester: pytest.Pytester, site_url: str) -> pytest.Pytester:
    """A pytester folder holding home.scenario.yaml, crash.scenario.yaml and homeless.scenario.yaml."""
    pytester.makefile(".scenario.yaml", home=SCENARIOS.format(url=site_url))
    pytester.makefile(".scenario.yaml", crash=CRASHES.format(url=site_url))
    pytester.makefile(".scenario.yaml", homeless=NO_ENVIRONMENT)
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    return pytester
