"""docs/index.md works as written: the Python first run, and the curl walkthrough against `scenariokit serve`.

The only rewrites are the addresses: https://example.com becomes a stand-in page on 127.0.0.1, and the
service listens on a free port instead of 13000 (``--port``). The service is the real command, started
in an empty folder with a clean environment, as a newcomer starts it.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import ROOT, code_block
from doc_commands import BIN, clean_env, free_port

pytestmark = pytest.mark.browser

INDEX_MD = ROOT / "docs" / "index.md"
DOC_SITE = "https://example.com"
DOC_BASE = "BASE=http://127.0.0.1:13000"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_the_python_first_run_prints_pass(
    example_site: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = code_block(INDEX_MD, after="## A first scenario from Python")
    assert code.count(DOC_SITE) == 1
    monkeypatch.delenv("SCENARIOKIT_SECRET_KEY", raising=False)  # as in a fresh shell: the key file
    monkeypatch.chdir(tmp_path)

    exec(compile(code.replace(DOC_SITE, example_site), "docs/index.md", "exec"), {"__name__": "__main__"})

    assert capsys.readouterr().out.splitlines() == ["pass None"]
    assert (tmp_path / "checks.db").is_file() and (tmp_path / "checks.key").is_file()


def walkthrough() -> str:
    """The sh block of "A first scenario over REST"."""
    return code_block(INDEX_MD, after="## A first scenario over REST", lang="sh")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`scenariokit serve --port PORT` in an empty folder; yields its base URL and the folder.

    One worker process instead of one per core keeps the test light; nothing else differs.
    """
    folder = tmp_path / "service"
    folder.mkdir()
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [str(BIN / "scenariokit"), "serve", "--port", str(port)],
        cwd=folder,
        env=clean_env(SCENARIOKIT_WORKERS="1"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as answer:
                    health = json.load(answer)
                break
            except OSError:
                assert time.monotonic() < deadline, "the service did not answer /health within 60 s"
                time.sleep(0.2)
        # What the page says the service answers once it is up.
        assert (health["status"], health["database"], health["browser"]) == ("ok", "ok", "ok")
        yield base, folder
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C, as the page says
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def run_walkthrough(script: str, base: str, site: str, folder: Path) -> dict[str, Any]:
    """Run the walkthrough in bash; returns the run the last command prints."""
    assert script.startswith(DOC_BASE + "\n") and script.count(DOC_SITE) == 1
    done = subprocess.run(
        ["bash", "-eu", "-c", script.replace(DOC_BASE, f"BASE={base}").replace(DOC_SITE, site)],
        cwd=folder,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    run: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return run


@pytest.mark.skipif(shutil.which("curl") is None, reason="the walkthrough needs curl, which is not installed")
@pytest.mark.platform
def test_the_rest_walkthrough_runs_against_scenariokit_serve(
    service: tuple[str, Path], example_site: str, tmp_path: Path
) -> None:
    base, folder = service
    assert (folder / "scenariokit.db").is_file() and (folder / "scenariokit.key").is_file()

    run = run_walkthrough(walkthrough(), base, example_site, tmp_path)

    assert (run["status"], run["error"], run["artifacts"]) == ("pass", None, [])
    assert [(r["title"], r["status"]) for r in run["stepResults"]] == [("Open", "pass"), ("Heading", "pass")]
    assert run["finishedAt"] and run["logs"]["items"]

    # "expect "Goodbye" instead of "Example Domain" to see one": the failure the page describes.
    failing = walkthrough().replace('\\"Example Domain\\"', '\\"Goodbye\\"')
    assert failing != walkthrough()
    failed = run_walkthrough(failing, base, example_site, tmp_path)

    assert failed["status"] == "fail" and [a["name"] for a in failed["artifacts"]] == ["step-2.png"]
    assert failed["artifacts"][0]["url"] == f"/api/v1/run/{failed['id']}/artifacts/step-2.png"
    assert failed["error"]["kind"] == "assertion" and "Goodbye" in failed["error"]["message"]
    assert any("Heading" in line["message"] for line in failed["logs"]["items"])
    with urllib.request.urlopen(f"{base}/api/v1/run/{failed['id']}/artifacts/step-2.png", timeout=10) as png:
        assert png.read().startswith(PNG_SIGNATURE)
