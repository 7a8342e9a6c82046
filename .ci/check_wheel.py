"""Install the built wheels into a fresh venv outside the source tree and use them as a user would.

Usage: ``python .ci/check_wheel.py DIST`` (``nox -s wheel`` builds DIST and calls this). Checks that:

- the wheel installs (not editable) with ``[server]``, and each plugin wheel beside it;
- ``scenariokit serve`` answers ``/health``, ``/docs``, ``/trace/`` and ``/report/`` and passes a run
  whose step uses a plugin's helper (so the plugins were found as installed distributions);
- the README's Python example prints ``pass``.

Everything it serves or targets is on 127.0.0.1. Exits non-zero, saying what failed, on the first
failure.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = b"<!doctype html><title>Example Domain</title><h1>Example Domain</h1>"
README_EXPECTED = "pass [('open', 'pass'), ('heading', 'pass')]"


def fail(message: str) -> None:
    """Stop the check with ``message``."""
    print(f"wheel check FAILED: {message}", file=sys.stderr)
    raise SystemExit(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_page() -> str:
    """Serve the example page on a free loopback port from a thread; its URL."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *args: object) -> None:
            pass  # the check's output stays about the wheel

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


def clean_env(**extra: str) -> dict[str, str]:
    """A newcomer's environment: none of the caller's scenariokit or Python path settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SCENARIOKIT_", "PYTEST_", "VIRTUAL_ENV")) and name != "PYTHONPATH"
    }
    env.update(extra)
    return env


def call(base: str, method: str, path: str, body: Any = None, *, status: int = 200) -> Any:
    """One JSON request to the served API; its decoded answer (checks the status)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{base}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            got, text = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        got, text = error.code, error.read()
    if got != status:
        fail(f"{method} {path} answered {got}, not {status}: {text[:500]!r}")
    content = text.decode()
    return json.loads(content) if content.lstrip().startswith(("{", "[")) else content


def install(folder: Path, dist: Path) -> Path:
    """A fresh venv in ``folder`` with the wheels of ``dist`` installed; its bin directory."""
    wheels = sorted(dist.glob("*.whl"))
    main = [wheel for wheel in wheels if wheel.name.startswith("scenariokit-")]
    if len(main) != 1:
        fail(f"expected one scenariokit wheel in {dist}, found {[w.name for w in wheels]}")
    plugins = [wheel for wheel in wheels if wheel not in main]
    if len(plugins) != len(list(ROOT.glob("plugins/*/pyproject.toml"))):
        fail(f"expected a wheel for every plugin distribution, found {[w.name for w in plugins]}")
    if not list(dist.glob("scenariokit-*.tar.gz")):
        fail("the sdist was not built")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, f"{main[0]}[server]", *map(str, plugins)], check=True, env=clean_env())
    return venv / "bin"


def check_installed(bin_dir: Path) -> None:
    """The package imports from the venv, not the source tree, with its data files and plugins; each
    distribution of ours states its licence as an SPDX expression (PEP 639), not the table and
    classifier setuptools stops building."""
    probe = (
        "import importlib.metadata as m, scenariokit, scenariokit.runner.confinement.driver_zygote as z\n"
        "print(scenariokit.__file__)\n"
        "print(z.ZYGOTE_SCRIPT.is_file())\n"
        "print(sorted(e.name for e in m.entry_points(group='scenariokit')))\n"
        "ours = [d for d in m.distributions() if d.metadata['Name'].startswith('scenariokit')]\n"
        "print(sorted({(d.metadata['License-Expression'], d.metadata['License']) for d in ours}))\n"
    )
    done = subprocess.run(
        [str(bin_dir / "python"), "-c", probe], capture_output=True, text=True, env=clean_env(), cwd="/"
    )
    if done.returncode != 0:
        fail(f"the installed package does not import: {done.stderr}")
    where, script, plugins, licences = done.stdout.splitlines()
    if str(ROOT) in where or "site-packages" not in where:
        fail(f"scenariokit imports from {where}, not from the venv's site-packages")
    if script != "True":
        fail("the wheel lacks the runner's JavaScript files (package data)")
    if licences != "[('MIT', None)]":
        fail(f"each of our distributions should say License-Expression: MIT alone; got {licences}")
    print(f"installed: {where}; plugins {plugins}")


def check_service(bin_dir: Path, folder: Path, site: str) -> None:
    """``scenariokit serve`` from the wheel answers its pages and passes a run that uses a plugin."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (folder / "serve.log").open("w")
    server = subprocess.Popen(
        [str(bin_dir / "scenariokit"), "serve", "--port", str(port)],
        cwd=folder, env=clean_env(), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        for _ in range(240):
            try:
                health = call(base, "GET", "/health")
                break
            except (OSError, SystemExit):
                if server.poll() is not None:
                    output = (folder / "serve.log").read_text()
                    fail(f"scenariokit serve exited with {server.returncode}: {output}")
                time.sleep(0.25)
        else:
            fail("scenariokit serve did not answer /health within a minute")
        print(f"/health: {health}")
        for page in ("/docs", "/trace/", "/report/"):
            call(base, "GET", page)
        environment = call(
            base, "POST", "/api/v1/environments", {"name": "site", "data": {"url": site}}, status=201
        )
        steps = [
            {"title": "open", "execCode": "await page.goto(helpers.getEnvUrl())"},
            {"title": "plugin", "execCode": "print('fake', '@' in helpers.fake.email())"},
            {
                "title": "heading",
                "execCode": "await expect(page.locator('h1')).to_have_text('Example Domain')",
            },
        ]
        scenario = call(base, "POST", "/api/v1/scenarios", {"name": "wheel", "steps": steps}, status=201)
        run = call(
            base,
            "POST",
            "/api/v1/run",
            {"scenarioId": scenario["id"], "environmentId": environment["id"]},
            status=201,
        )
        deadline = time.monotonic() + 120
        while run["status"] == "in_progress" and time.monotonic() < deadline:
            time.sleep(0.5)
            run = call(base, "GET", f"/api/v1/run/{run['id']}")
        results = [(result["title"], result["status"]) for result in run["stepResults"]]
        if run["status"] != "pass":
            fail(f"the served run ended {run['status']}: {run.get('error')} {results}")
        logs = call(base, "GET", f"/api/v1/run/{run['id']}?q=fake")
        if not any("fake True" in line["message"] for line in logs["logs"]["items"]):
            fail(f"the plugin's helper did not run in the worker: {logs['logs']}")
        print(f"served run: pass {results}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def check_readme_example(bin_dir: Path, folder: Path, site: str) -> None:
    """The README's Python example, run by the venv's Python from a folder of its own, prints pass."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("## Use it from Python") :]
    code = block[block.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    example = folder / "readme_example"
    example.mkdir()
    (example / "example.py").write_text(code)
    done = subprocess.run(
        [str(bin_dir / "python"), "example.py"],
        cwd=example, env=clean_env(SITE_URL=site), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0 or done.stdout.strip().splitlines() != [README_EXPECTED]:
        fail(f"the README's example printed {done.stdout!r} (exit {done.returncode}): {done.stderr[-2000:]}")
    print(f"README example: {done.stdout.strip()}")


def main() -> None:
    dist = Path(sys.argv[1]).resolve()
    site = serve_page()
    # nox points TMPDIR into the tree's .nox folder: the venv goes where a user's would, outside it
    outside = "/tmp" if Path(tempfile.gettempdir()).resolve().is_relative_to(ROOT) else None
    with tempfile.TemporaryDirectory(prefix="scenariokit-wheel-", dir=outside) as tmp:
        folder = Path(tmp)
        bin_dir = install(folder, dist)
        check_installed(bin_dir)
        check_service(bin_dir, folder, site)
        check_readme_example(bin_dir, folder, site)
    print("wheel check passed")


if __name__ == "__main__":
    main()
