"""Developer sessions: tests, lint, typecheck, serve, bench, docs. Dependencies come from pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
PLUGINS = sorted(str(path.parent) for path in ROOT.glob("plugins/*/pyproject.toml"))


def _install_project(session: nox.Session, extras: str) -> None:
    session.install("-e", f".[{extras}]")
    for plugin in PLUGINS:
        session.install("-e", plugin)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the whole test suite (SQLite and PostgreSQL, real Chromium, real HTTP)."""
    _install_project(session, "test")
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common bugs with ruff."""
    session.install("ruff")
    paths = ["src", "tests", "bench", "plugins", "noxfile.py", "docs/hooks.py"]
    session.run("ruff", "check", *paths, *session.posargs)


@nox.session
def typecheck(session: nox.Session) -> None:
    """Check types with mypy: the library and the server, then each plugin distribution."""
    _install_project(session, "dev")
    session.run("mypy", *session.posargs)
    if not session.posargs:
        session.run("mypy", *(f"{plugin}/src" for plugin in PLUGINS))


@nox.session
def serve(session: nox.Session) -> None:
    """Start the service on 127.0.0.1:13000 with the embedded SQLite database (./scenariokit.db)."""
    _install_project(session, "server")
    session.run("scenariokit", "serve", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks under bench/, each printing ratios against a baseline measured in the same run."""
    _install_project(session, "test")
    # files starting with "_" hold what the benchmarks share
    scripts = session.posargs or sorted(str(p) for p in (ROOT / "bench").glob("[!_]*.py"))
    for script in scripts:
        session.run("python", script)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with warnings as errors."""
    _install_project(session, "dev")
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Run schemathesis (all checks; examples, coverage, fuzzing, stateful) against a served instance.

    The server runs on a free loopback port over a new SQLite file, without a scheduler; arguments
    go to ``st run`` (default ``--max-examples 200``). Settings: ``schemathesis.toml``.
    """
    import os
    import socket
    import subprocess
    import tempfile
    import time
    import urllib.request

    _install_project(session, "test")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **os.environ,
            "SCENARIOKIT_DATABASE_URL": f"sqlite:///{folder}/scenariokit.db",
            "SCENARIOKIT_ARTIFACTS_DIR": f"{folder}/artifacts",
            "SCENARIOKIT_RUN_SCHEDULER": "false",
        }
        scenariokit = os.path.join(session.bin, "scenariokit")
        server = subprocess.Popen([scenariokit, "serve", "--port", str(port)], env=env)
        try:
            for _ in range(120):
                try:
                    urllib.request.urlopen(f"{url}/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.5)
            else:
                session.error("the server did not answer /health")
            args = session.posargs or ["--max-examples", "200"]
            session.run(
                "st", "run", f"{url}/docs/openapi.json", "--checks", "all",
                "--phases", "examples,coverage,fuzzing,stateful", *args,
            )  # fmt: skip
        finally:
            server.terminate()
            server.wait(timeout=30)
