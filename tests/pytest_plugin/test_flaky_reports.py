"""A scenario that passes only on a retry is reported flaky, by ``scenariokit run`` and by pytest."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from scenariokit.cli import main

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.browser

#: fails on the first hit of the page (``Not yet``), passes after; one retry, a short fixed backoff
FLAKY_FILE = """\
# environments
---
kind: environment
name: local
data:
  url: {url}
# scenarios
---
kind: scenario
name: warms up
retries:
  count: 1
  backoff: fixed
  backoffSeconds: 0.2
steps:
  - title: greeted
    execCode: |
      await page.goto(helpers.getEnvUrl())
      await expect(page.locator("h1")).to_have_text("Hello", timeout=1000)
"""


@contextlib.contextmanager
def first_hit_fails() -> Iterator[str]:
    """A page on 127.0.0.1 that says ``Not yet`` on its first hit and ``Hello`` after; yields its URL."""
    hits = [0]

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits[0] += 1
            body = b"<h1>Not yet</h1>" if hits[0] == 1 else b"<h1>Hello</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_scenariokit_run_reports_a_pass_after_a_retry_as_flaky(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with first_hit_fails() as url:
        path = tmp_path / "warm.scenario.yaml"
        path.write_text(FLAKY_FILE.format(url=url))
        status = main(["run", str(path), "--artifacts", str(tmp_path / "art"), "--workers", "1"])
    shown = capsys.readouterr().out
    assert status == 0, shown
    assert "FLAKY warms up" in shown and "1 passed (1 flaky), 0 failed" in shown


def test_the_pytest_plugin_reports_a_pass_after_a_retry_as_flaky(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    with first_hit_fails() as url:
        pytester.makefile(".scenario.yaml", warm=FLAKY_FILE.format(url=url))
        result = pytester.runpytest_inprocess("-v", "--scenariokit-artifacts", str(pytester.path / "art"))
    result.stdout.fnmatch_lines(["*warm.scenario.yaml::warms up FLAKY*", "*1 flaky*"])
    assert result.ret == 0
