"""Developer sessions: tests, platform, wheel, lint, typecheck, serve, bench, docs.

Dependencies come from pyproject.toml. ``tests`` and ``platform`` run once for every supported CPython
this machine has (docs/install.md): the distribution's ``/usr/bin/python3`` as ``system``, others by
version, e.g. ``nox -s "tests(3.12)"``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
PLUGINS = sorted(str(path.parent) for path in ROOT.glob("plugins/*/pyproject.toml"))
#: What pyproject.toml's requires-python and classifiers promise, and the suite runs on.
SUPPORTED = ("3.11", "3.12", "3.13")


def _cpython(path: str) -> tuple[str, str] | None:
    """``(version, real executable)`` of a supported CPython at ``path``, or None (a pyenv shim that
    does not answer, another implementation, an unsupported version)."""
    probe = "import sys; print('%d.%d' % sys.version_info[:2], sys.implementation.name, sys.executable)"
    try:
        done = subprocess.run([path, "-c", probe], capture_output=True, text=True, timeout=20, check=False)
    except OSError:
        return None
    words = done.stdout.strip().split(maxsplit=2)
    if done.returncode != 0 or len(words) != 3 or words[1] != "cpython" or words[0] not in SUPPORTED:
        return None
    return words[0], os.path.realpath(words[2])


def interpreters() -> dict[str, str]:
    """Every supported CPython here, by session id: ``system`` for the distribution's own, else its version.

    Found on ``PATH`` (``python3.12``) and in pyenv's versions folder, each executable once.
    """
    found: dict[str, str] = {}
    seen: set[str] = set()
    system = _cpython("/usr/bin/python3")
    if system:
        found["system"] = "/usr/bin/python3"
        seen.add(system[1])
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for version in SUPPORTED:
        pyenv_builds = sorted(glob.glob(f"{pyenv}/{version}.*/bin/python3"))
        candidates = [shutil.which(f"python{version}"), *pyenv_builds]
        for candidate in filter(None, candidates):
            answer = _cpython(candidate)
            if answer and answer[0] == version and answer[1] not in seen:
                seen.add(answer[1])
                found[version] = answer[1]
                break
    return found


INTERPRETERS = interpreters()
PYTHONS = [nox.param(path, id=name) for name, path in INTERPRETERS.items()]


def _install_project(session: nox.Session, extras: str) -> None:
    session.install("-e", f".[{extras}]")
    for plugin in PLUGINS:
        session.install("-e", plugin)


@nox.session
@nox.parametrize("python", PYTHONS)
def tests(session: nox.Session) -> None:
    """Run the whole test suite (SQLite and PostgreSQL, real Chromium, real HTTP) on one interpreter."""
    _install_project(session, "test")
    # one pytest-xdist worker per core: the suite waits on browsers and processes as much as it computes
    session.run("pytest", *(session.posargs or ["-q", "-n", "auto"]))


@nox.session
@nox.parametrize("python", PYTHONS)
def platform(session: nox.Session) -> None:
    """Run the platform lane: the tests marked ``platform``, one or two through every layer, for real."""
    _install_project(session, "test")
    session.run("pytest", "-m", "platform", *(session.posargs or ["-q"]))


@nox.session
def wheel(session: nox.Session) -> None:
    """Build the sdist and wheels, install them into a fresh venv outside the tree, and use the service.

    The check itself is ``.ci/check_wheel.py``: ``scenariokit serve`` answers its pages and passes a
    run, and the README's Python example passes.
    """
    session.install("build")
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for project in [str(ROOT), *PLUGINS]:
        session.run("python", "-m", "build", "--outdir", str(dist), project, silent=True)
    session.run("python", str(ROOT / ".ci" / "check_wheel.py"), str(dist), *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common bugs with ruff."""
    session.install("ruff")
    paths = ["src", "tests", "bench", "plugins", "noxfile.py", "docs/hooks.py", ".ci/check_wheel.py"]
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
