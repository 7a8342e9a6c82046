"""How workers are started: what they keep of the environment, what bubblewrap hides, when it is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scenariokit.runner import sandbox
from scenariokit.runner.browser import BrowserConfig
from scenariokit.runner.executor import WorkerPool
from scenariokit.runner.sandbox import (
    SandboxConfig,
    SandboxUnavailable,
    bubblewrap_argv,
    resolve_sandbox,
    worker_environment,
)


def test_a_worker_keeps_no_setting_of_the_service() -> None:
    environ = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "SCENARIOKIT_SECRET_KEY": "key",
        "SCENARIOKIT_DATABASE_URL": "postgresql+asyncpg://u:pw@db/sk",
        "DATABASE_URL": "postgres://u:pw@db/sk",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "HOME": "/root",
        "PYTHONPATH": "/srv/app",
        "MARK": "kept when named",
    }

    env = worker_environment("/private", environ=environ, extra=("MARK", "SCENARIOKIT_API_TOKENS"))

    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MARK": "kept when named",
        "HOME": "/private/home",
        "TMPDIR": "/private/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }


def test_bubblewrap_hides_the_store_and_puts_back_only_what_the_worker_imports(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code = store / "venv"
    code.mkdir(parents=True)
    (store / "app.db").write_text("")

    argv = bubblewrap_argv(tmp_path / "run", [store], [code])

    joined = " ".join(argv)
    assert f"--tmpfs {store}" in joined
    assert f"--ro-bind {code} {code}" in joined
    assert f"--bind {tmp_path / 'run'} {sandbox.SANDBOX_RUN_DIR}" in joined
    assert f"--tmpfs {Path.cwd().resolve()}" in joined, "the server's working directory is hidden"
    for flag in ("--unshare-pid", "--die-with-parent", "--ro-bind / /"):
        assert flag in joined


def test_what_a_worker_needs_under_tmp_is_bound_back_into_its_private_tmp(tmp_path: Path) -> None:
    # A CI clone and its virtualenv may live in /tmp, which the sandbox replaces by an empty tmpfs.
    checkout = Path("/tmp") / f"scenariokit-test-checkout-{os.getpid()}"
    venv = checkout / ".nox" / "tests"
    try:
        venv.mkdir(parents=True)

        argv = bubblewrap_argv(tmp_path / "run", [], [venv])

        joined = " ".join(argv)
        assert "--tmpfs /tmp" in joined
        assert f"--ro-bind {venv} {venv}" in joined
        assert f"--perms 0755 --dir {checkout}" in joined, "its folders stay passable for the worker's user"
    finally:
        import shutil

        shutil.rmtree(checkout, ignore_errors=True)


async def test_bubblewrap_required_but_missing_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="SCENARIOKIT_SANDBOX=bubblewrap but bwrap is not installed"):
        resolve_sandbox("bubblewrap")
    assert resolve_sandbox("auto") == "none"
    pool = WorkerPool(
        1, browser=BrowserConfig(executable="/bin/true"), sandbox=SandboxConfig(mode="bubblewrap")
    )
    with pytest.raises(SandboxUnavailable):
        await pool.start()
    assert pool.worker_pids() == []


def test_off_never_uses_bubblewrap() -> None:
    assert resolve_sandbox("off") == "none"
    assert SandboxConfig.from_env({"SCENARIOKIT_SANDBOX": "off", "SCENARIOKIT_RUN_MEMORY_MB": "512"}) == (
        SandboxConfig(mode="off", limits=sandbox.ResourceLimits(memory_mb=512))
    )
    assert os.environ.get("SCENARIOKIT_SANDBOX", "auto") in sandbox.SANDBOX_MODES


def test_serve_refuses_to_start_when_bubblewrap_is_required_and_missing(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {
        "PATH": str(tmp_path),  # no bwrap there
        "SCENARIOKIT_SANDBOX": "bubblewrap",
        "SCENARIOKIT_BROWSER_PATH": sys.executable,  # any executable: the sandbox is checked first
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "SCENARIOKIT_SECRET_KEY": "sandbox-test-key",
    }
    done = subprocess.run(
        [sys.executable, "-m", "scenariokit.cli", "serve", "--port", "0", "--database-url",
         f"sqlite:///{tmp_path / 'refused.db'}"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert "SCENARIOKIT_SANDBOX=bubblewrap but bwrap is not installed" in done.stderr
    assert "Running on" not in done.stdout
