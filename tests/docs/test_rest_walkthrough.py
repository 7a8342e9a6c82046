"""The curl walkthrough of docs/rest.md runs as written, top to bottom in one bash shell.

Its ``sh`` blocks are joined into one script and run against the real app served on a loopback port,
with a real scheduler running the runs in Chromium. The only rewrites are the two addresses: the
server's (``BASE=``) and the environment's site, which is a page served here on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from doc_blocks import ROOT, code_blocks

from scenariokit.domain.errors import BrowserUnavailable
from scenariokit.runner.worker.browser import discover_browser
from scenariokit_server import Settings
from served_pages import serve_pages


def _live_server() -> ModuleType:
    """tests/api/live_server.py, whose folder is on sys.path only when the API tests are collected too."""
    if "live_server" not in sys.modules:
        spec = importlib.util.spec_from_file_location("live_server", ROOT / "tests/api/live_server.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["live_server"] = module
        spec.loader.exec_module(module)
    return sys.modules["live_server"]


serve = _live_server().serve

pytestmark = pytest.mark.browser

REST_MD = ROOT / "docs" / "rest.md"
HEADING = "## Walkthrough with curl"
#: the two addresses the test rewrites: the server's, and the site the environment points at
DOC_BASE = "BASE=http://127.0.0.1:13000"
DOC_SITE = "https://staging.example.com"
SECRET = "correct horse battery staple"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: The stand-in for the staging site: a login form under a title that is not "Shop", so the scenario
#: fails at step 2 ("Check the title") as the walkthrough says, recording step-2.png and trace.zip.
STAGING_PAGE = """<!doctype html><title>Staging</title><h1>Staging</h1>
<input id="user"><button>Sign in</button>"""


def walkthrough_script() -> str:
    """Every ``sh`` block after the walkthrough heading, in order, as one script."""
    return "\n".join(code_blocks(REST_MD, after=HEADING, lang="sh"))


@pytest.fixture
def site() -> Iterator[str]:
    """The stand-in for https://staging.example.com, on a free port of 127.0.0.1."""
    with serve_pages({"/": STAGING_PAGE}) as base:
        yield base


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    """The real app over a SQLite file, its scheduler running runs in Chromium and tracing failed ones."""
    try:
        discover_browser()
    except BrowserUnavailable as exc:
        pytest.skip(f"the walkthrough's runs need Chromium: {exc}")
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'scenariokit.db'}",
        secret_key="walkthrough-secret-key",
        artifacts_dir=tmp_path / "artifacts",
        trace="always",  # as `SCENARIOKIT_TRACE=always scenariokit serve`, which the doc starts
        workers=1,
        session_keepalive_seconds=30,
    )
    with serve(settings) as url:
        yield url


def test_the_addresses_the_test_rewrites_are_in_the_walkthrough() -> None:
    script = walkthrough_script()
    assert script.startswith(DOC_BASE + "\n")
    assert script.count(DOC_BASE) == 1 and script.count(DOC_SITE) == 1


@pytest.mark.skipif(shutil.which("curl") is None, reason="the walkthrough needs curl, which is not installed")
def test_the_curl_walkthrough_works_as_written(
    site: str, base_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = walkthrough_script().replace(DOC_BASE, f"BASE={base_url}").replace(DOC_SITE, site)
    work = tmp_path / "work"
    work.mkdir()

    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    out = done.stdout
    assert done.returncode == 0, f"the walkthrough failed ({done.returncode}):\n{done.stderr}\n{out}"
    pieces = output_pieces(out)
    documents = [piece for piece in pieces if not isinstance(piece, str)]
    lines = [piece for piece in pieces if isinstance(piece, str)]

    # Health and docs
    health = documents[0]
    assert (health["status"], health["database"], health["browser"]) == ("ok", "ok", "ok")
    assert json.loads((work / "openapi.json").read_text())["openapi"].startswith("3.")

    # Every `-w '%{http_code}'` line answers what its comment in the doc says (one without: success):
    # /docs, the linked credential's DELETE, the unrecorded artifact, cancelling the finished run, the
    # session's DELETE, then the six DELETEs at the end.
    codes = [line for line in lines if re.fullmatch(r"\d{3}", line)]
    assert codes == ["200", "409", "404", "409", "204"] + ["204"] * 6
    documented = documented_status_codes()
    assert len(documented) == len(codes)
    for code, (command, expected) in zip(codes, documented, strict=True):
        assert (code == expected) if expected else (code in {"200", "204"}), f"{command} answered {code}"

    # The environment points at the stand-in site; PATCH changed only the description.
    environments = [d for d in documents if isinstance(d, dict) and d.get("name") == "staging"]
    assert environments[0]["data"] == {"url": site, "locale": "en"}
    assert environments[1]["description"] == "Staging (EU)" and environments[1]["data"]["url"] == site

    # Credentials: the secret is never shown; an update without one keeps it.
    credentials = [d for d in documents if isinstance(d, dict) and "hasSecret" in d]
    assert [(c["username"], c["hasSecret"]) for c in credentials] == [
        ("admin@example.com", True),
        ("root@example.com", True),
    ]
    assert all("secret" not in c for c in credentials)
    assert SECRET not in out and SECRET not in done.stderr

    # Steps: the reorder moved "Log in first" last, and the run follows that order.
    step_lists = [d for d in documents if isinstance(d, list) and d and "execCode" in d[0]]
    assert [s["title"] for s in step_lists[0]] == ["Log in first", "Open the shop", "Check the title"]
    assert [s["title"] for s in step_lists[-1]] == ["Open the shop", "Check the title", "Log in first"]

    # The second snippet with alias "login" is refused.
    conflicts = [d for d in documents if isinstance(d, dict) and d.get("status") == 409]
    assert len(conflicts) == 1 and "login" in conflicts[0]["detail"]

    # Runs: the first fails at step 2 and records a screenshot, a trace and a session; the second is
    # cancelled.
    runs = [d for d in documents if isinstance(d, dict) and "stepResults" in d]
    created, finished, cancelling, cancelled = runs
    assert created["status"] == "in_progress" and created["saveSession"] is True
    assert finished["id"] == created["id"] and finished["status"] == "fail"
    assert finished["error"]["kind"] == "assertion" and "Staging" in finished["error"]["message"]
    assert [(r["title"], r["status"]) for r in finished["stepResults"]] == [
        ("Open the shop", "pass"),
        ("Check the title", "fail"),
        ("Log in first", "skipped"),
    ]
    assert [(a["name"], a["contentType"]) for a in finished["artifacts"]] == [
        ("step-2.png", "image/png"),
        ("trace.zip", "application/zip"),
    ]
    assert finished["traceViewerUrl"].startswith("/trace/index.html?trace=")
    assert finished["session"]["name"] == f"run-{created['id']}"
    assert finished["logs"]["limit"] == 50
    assert all("timeout" in line["message"].lower() for line in finished["logs"]["items"])
    failed_list = next(d for d in documents if isinstance(d, dict) and d.get("limit") == 20 and _runs(d))
    assert [(r["id"], r["status"]) for r in failed_list["items"]] == [(created["id"], "fail")]
    assert cancelling["id"] == cancelled["id"] != created["id"] and cancelled["saveSession"] is False
    assert cancelling["status"] == "in_progress" or cancelling["error"]["kind"] == "cancelled"
    assert cancelled["status"] == "fail" and cancelled["error"]["kind"] == "cancelled"
    assert cancelled["artifacts"] == [] and cancelled["session"] is None
    assert cancelled["traceViewerUrl"] is None
    assert (work / "step-2.png").read_bytes().startswith(PNG_SIGNATURE)
    assert zipfile.is_zipfile(work / "trace.zip")

    # Sessions: the first run's; reads leave out its storage state. Its DELETE answered 204 above.
    sessions = next(d for d in documents if isinstance(d, dict) and "items" in d and _sessions(d))
    assert [s["name"] for s in sessions["items"]] == [f"run-{created['id']}"]
    session = next(d for d in documents if isinstance(d, dict) and d.get("runId") == created["id"])
    assert session["id"] == finished["session"]["id"] and "storageState" not in session

    # Exports: the secret only where asked for; the scenario export holds the sections asked for.
    assert SECRET in (work / "admin.yaml").read_text()
    for name in ("all-scenarios.yaml", "checkout.yaml", "login.yaml"):
        assert SECRET not in (work / name).read_text(), name
    checkout = (work / "checkout.yaml").read_text()
    assert [line for line in checkout.splitlines() if line.startswith("# ")] == [
        "# environments",
        "# credentials",
        "# scenarios",
    ]
    assert "kind: scenario" in lines and "kind: environment" in lines  # the exports shown

    # Imports: each answers what it created and updated; the scenario stream updates all three.
    imports = [d for d in documents if isinstance(d, dict) and "updated" in d]
    assert [sorted(d["updated"]) for d in imports] == [
        ["credential", "environment", "scenario"],
        ["credential"],
        ["snippet"],
        ["environment"],
    ]
    assert imports[0]["counts"] == {"created": 0, "updated": 3}

    # The server logged no error along the way.
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("scenariokit")]
    assert not errors, [r.getMessage() for r in errors]


def output_pieces(out: str) -> list[Any]:
    """The script's output as the JSON values and the other lines it holds, in order.

    curl prints bodies without a trailing newline, so JSON documents follow each other on one line.
    """
    decoder = json.JSONDecoder()
    pieces: list[Any] = []
    at = 0
    while at < len(out):
        if out[at].isspace():
            at += 1
        elif out[at] in "{[":
            value, at = decoder.raw_decode(out, at)
            pieces.append(value)
        else:
            end = out.find("\n", at)
            end = len(out) if end < 0 else end
            pieces.append(out[at:end].rstrip())
            at = end
    return pieces


def documented_status_codes() -> list[tuple[str, str | None]]:
    """Each command of the walkthrough that prints its status code, with the code its comment gives."""
    found = []
    for line in walkthrough_script().splitlines():
        if "%{http_code}" in line:
            comment = re.search(r"#\s*(\d{3})\b", line)
            found.append((line.strip(), comment[1] if comment else None))
    return found


def _runs(page: dict[str, Any]) -> bool:
    return bool(page.get("items")) and all("stepResults" in item for item in page["items"])


def _sessions(page: dict[str, Any]) -> bool:
    return bool(page.get("items")) and all("runId" in item and "token" in item for item in page["items"])
