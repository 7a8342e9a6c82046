"""Clients generated from the live ``/docs/openapi.json`` read right, as frontends and Python users make them.

A real server answers on a loopback port. openapi-typescript generates its types and ``tsc --strict``
compiles ``clients/usage.mts`` (openapi-fetch over those types, no cast), which node then runs against
the server; openapi-python-client generates a package whose round trip (``clients/round_trip.py``)
runs against the server too; Spectral's ``spectral:oas`` ruleset finds no problem in the document.

The tools are pinned and installed once into a folder these tests manage: ``$SCENARIOKIT_CLIENT_TOOLS``,
else ``~/.cache/scenariokit/client-tools`` (npm packages under ``npm/``, the Python generator in a
virtual environment under ``python/``); a later run reuses them. Where node/npm is missing, or npm's
registry or PyPI cannot be reached to install them, the tests skip and say so.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from live_server import serve

from scenariokit_server import Settings, create_app

CLIENTS = Path(__file__).parent / "clients"
ROOT = Path(__file__).parents[2]
TOOLS_ENV = "SCENARIOKIT_CLIENT_TOOLS"
#: The npm packages, pinned: the type generator, the compiler, the fetch client over the types, the linter.
NPM_PACKAGES = {
    "openapi-typescript": "7.13.0",
    "typescript": "5.9.3",
    "openapi-fetch": "0.17.0",
    "@stoplight/spectral-cli": "6.16.3",
}
PYTHON_GENERATOR = ("openapi-python-client", "0.29.1")
#: Slow machines (CI shares its cores) get time; nothing here is a timed assertion.
INSTALL_TIMEOUT = 900
STEP_TIMEOUT = 300


def _tools_root() -> Path:
    configured = os.environ.get(TOOLS_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "scenariokit" / "client-tools"


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One installer at a time per folder (parallel workers, or two checkouts sharing the cache)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(
    args: Sequence[str | Path],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = STEP_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _succeeded(result: subprocess.CompletedProcess[str], what: str) -> str:
    assert result.returncode == 0, f"{what} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _npm_installed(folder: Path) -> bool:
    for name, version in NPM_PACKAGES.items():
        manifest = folder / "node_modules" / name / "package.json"
        if not manifest.is_file() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return True


@pytest.fixture(scope="session")
def npm_tools() -> Path:
    """The folder whose ``node_modules`` holds the pinned npm packages, installed on first use."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("node and npm are needed to generate and compile the TypeScript client")
    folder = _tools_root() / "npm"
    with _locked(folder):
        if not _npm_installed(folder):
            manifest = {"private": True, "dependencies": NPM_PACKAGES}
            (folder / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
            result = _run(
                [npm, "install", "--no-audit", "--no-fund", "--no-update-notifier"],
                cwd=folder,
                timeout=INSTALL_TIMEOUT,
            )
            if result.returncode != 0:
                if _run([npm, "ping"], cwd=folder, timeout=60).returncode != 0:
                    pytest.skip(f"npm's registry is unreachable; cannot install {', '.join(NPM_PACKAGES)}")
                _succeeded(result, "npm install")
    return folder


@pytest.fixture(scope="session")
def python_generator() -> Path:
    """The Python of a virtual environment holding the pinned openapi-python-client, made on first use.

    The generated package imports httpx and attrs, which the generator itself depends on, so its round
    trip runs in the same environment.
    """
    folder = _tools_root() / "python"
    environment = folder / "venv"
    python = environment / "bin" / "python"
    name, version = PYTHON_GENERATOR
    with _locked(folder):
        shown = _run([python, "-m", "pip", "show", name], cwd=folder).stdout if python.is_file() else ""
        if f"Version: {version}" not in shown:
            _succeeded(_run([sys.executable, "-m", "venv", "--clear", environment], cwd=folder), "venv")
            result = _run(
                [python, "-m", "pip", "install", "-q", f"{name}=={version}"],
                cwd=folder,
                timeout=INSTALL_TIMEOUT,
            )
            if result.returncode != 0:
                if _run([python, "-m", "pip", "index", "versions", name], cwd=folder, timeout=120).returncode:
                    pytest.skip(f"PyPI is unreachable; cannot install {name}=={version}")
                _succeeded(result, f"pip install {name}")
    return python


#: Resources the round trips leave out, with why: authoring sessions need a scheduler and a browser
#: (tests/api and tests/mcp drive them for real).
NOT_IN_THE_ROUND_TRIPS = {"authoring"}


def test_the_round_trips_touch_every_resource() -> None:
    """A resource the document gains (audit, say) needs a function in usage.mts and in round_trip.py."""
    document = create_app(Settings(database_url="sqlite://"))["swagger_dict"]
    resources = {path.split("/")[3] for path in document["paths"] if path.startswith("/api/v1/")}
    for usage in (CLIENTS / "usage.mts", CLIENTS / "round_trip.py"):
        text = usage.read_text()
        touched = {name for name in resources if f"/api/v1/{name}" in text or f"api.{name}" in text}
        missing = resources - touched - NOT_IN_THE_ROUND_TRIPS
        assert not missing, f"{usage.name} does not use /api/v1/{sorted(missing)}: add a function for each"


@pytest.fixture
def live_url(tmp_path: Path) -> Iterator[str]:
    """A real server over a store of its own, on a loopback port (no scheduler: runs stay queued)."""
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/scenariokit.db",
        secret_key="generated-clients-key",
        run_scheduler=False,
        artifacts_dir=tmp_path / "artifacts",
        workers=1,
    )
    with serve(settings) as url:
        yield url


def test_typescript_client_compiles_strictly_and_runs_the_round_trip(
    npm_tools: Path, live_url: str, tmp_path: Path
) -> None:
    bin_dir = npm_tools / "node_modules" / ".bin"
    work = tmp_path / "ts"
    work.mkdir()
    (work / "node_modules").symlink_to(npm_tools / "node_modules")
    shutil.copy(CLIENTS / "usage.mts", work / "usage.mts")
    _succeeded(
        _run([bin_dir / "openapi-typescript", f"{live_url}/docs/openapi.json", "-o", "api.ts"], cwd=work),
        "openapi-typescript",
    )
    types = (work / "api.ts").read_text()
    # a nullable reference is the thing or null, never a phantom empty object besides
    assert "Record<string, never> | null" not in types
    assert 'error: components["schemas"]["RunError"] | null;' in types
    assert 'session: components["schemas"]["Session"] | null;' in types
    # the generated types and the usage file are checked whole; the libraries' own declarations (the
    # DOM's, openapi-fetch's) are not ours to check, and skipping them halves the compile
    compiler = [
        "--strict",
        "--skipLibCheck",
        "--target",
        "es2022",
        "--lib",
        "es2022,dom",
        "--module",
        "nodenext",
    ]
    _succeeded(
        _run([bin_dir / "tsc", *compiler, "--outDir", "out", "usage.mts", "api.ts"], cwd=work),
        "tsc --strict",
    )
    ran = _succeeded(_run(["node", "out/usage.mjs", live_url], cwd=work), "the TypeScript round trip")
    assert "round trip passed" in ran


def test_python_client_generates_and_runs_the_round_trip(
    python_generator: Path, live_url: str, tmp_path: Path
) -> None:
    # no post hooks: formatting the generated code with ruff only costs time here
    (tmp_path / "generator.json").write_text(json.dumps({"post_hooks": []}))
    generated = _run(
        [
            python_generator.parent / "openapi-python-client",
            "generate",
            "--url",
            f"{live_url}/docs/openapi.json",
            "--meta",
            "none",
            "--config",
            "generator.json",
        ],
        cwd=tmp_path,
    )
    output = _succeeded(generated, "openapi-python-client generate") + generated.stderr
    # generators skip YAML bodies (docs/rest.md says how to call those operations); nothing else is skipped
    warnings = [line for line in output.splitlines() if line.startswith("WARNING parsing")]
    assert all(" within transfer." in line for line in warnings), warnings
    assert (tmp_path / "scenariokit_client" / "api" / "runs" / "create_run.py").is_file()
    ran = _succeeded(
        _run(
            [python_generator, CLIENTS / "round_trip.py", live_url],
            cwd=tmp_path,
            env={"PYTHONPATH": str(tmp_path)},
        ),
        "the Python round trip",
    )
    assert "round trip passed" in ran


def test_spectral_oas_ruleset_finds_no_problem(npm_tools: Path, live_url: str, tmp_path: Path) -> None:
    report = tmp_path / "spectral.json"
    _run(
        [
            npm_tools / "node_modules" / ".bin" / "spectral",
            "lint",
            f"{live_url}/docs/openapi.json",
            "--ruleset",
            ROOT / ".spectral.yaml",
            "--format",
            "json",
            "--output",
            report,
            "--fail-severity",
            "hint",
        ],
        cwd=tmp_path,
    )
    assert report.is_file(), "spectral wrote no report"
    problems = [
        f"{p['code']}: {p['message']} at {'.'.join(map(str, p['path']))}"
        for p in json.loads(report.read_text())
    ]
    assert problems == []
