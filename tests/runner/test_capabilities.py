"""Each Linux-only path is chosen by trying it: with the capability missing, runs still pass, and the log says
what was left out (docs/deployment.md, "What each machine gives the runner").

Each case takes one capability away the way a machine without it would show it to the probe (no
``bwrap`` on ``PATH``, no control group to make, ``pidfd_open`` failing, ``/proc`` unreadable, a zygote
that cannot start or join a sandbox, a Node that cannot be a driver zygote), starts a pool and runs a job.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from scenariokit.domain.job import RunEvent, RunFinished, RunJob
from scenariokit.runner.confinement import driver_zygote, processes, sandbox
from scenariokit.runner.confinement import zygote as zygote_module
from scenariokit.runner.confinement.cgroups import open_run_groups
from scenariokit.runner.confinement.sandbox import SandboxConfig, SandboxMode, bubblewrap_works
from scenariokit.runner.parent import executor
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.worker.browser import discover_browser

pytestmark = pytest.mark.asyncio(loop_scope="session")
JobFactory = Callable[..., RunJob]
Runner = Callable[..., Awaitable[tuple[RunFinished, list[RunEvent]]]]


def _no_pidfd(pid: int, flags: int = 0) -> int:
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))


def take_away(what: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[SandboxMode, str]:
    """Make the probe of ``what`` fail here; the sandbox mode to run with, and the note the log must hold."""
    if what == "bubblewrap":
        monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
        return "auto", (
            "left out: bubblewrap: bwrap is not installed (not found on PATH); "
            "workers run without a sandbox (SCENARIOKIT_SANDBOX=auto)"
        )
    if what == "control groups":
        no_root = functools.partial(open_run_groups, root=tmp_path / "no-cgroup-hierarchy")
        monkeypatch.setattr(executor, "open_run_groups", no_root)
        return "off", "left out: control groups: this process may make none here"
    if what == "pidfd":
        monkeypatch.setattr(os, "pidfd_open", _no_pidfd)
        zygote_module.pidfd_problem.cache_clear()
        return (
            "off",
            "left out: the worker zygote: pidfd_open: Function not implemented; workers start by exec",
        )
    if what == "/proc":
        monkeypatch.setattr(processes, "PROC", tmp_path / "no-proc")
        return "off", f"left out: /proc: {tmp_path / 'no-proc'} cannot be read here"
    if what == "zygote start":
        monkeypatch.setattr(zygote_module, "ZYGOTE_BOOTSTRAP", "raise SystemExit('no fork server here')")
        return "off", "left out: the worker zygote: the zygote did not come up"
    if what == "joining a sandbox":
        if not bubblewrap_works():
            pytest.skip("bubblewrap cannot start a sandbox on this machine")
        simulated = "a sandbox's namespaces cannot be joined from outside it (setns: Operation not permitted)"
        monkeypatch.setattr(zygote_module, "sandbox_entry_problem", lambda bwrap: simulated)
        return "bubblewrap", f"left out: the worker zygote: {simulated}; workers start by exec"
    assert what == "driver zygote"
    monkeypatch.setattr(executor, "_driver_zygotes", {})  # none started by another pool of this session
    monkeypatch.setattr(driver_zygote, "zygote_supported", lambda node: False)
    return "off", "left out: the Playwright driver zygote: RuntimeError: this Node.js cannot fork"


@pytest.mark.parametrize(
    "what",
    ["bubblewrap", "control groups", "pidfd", "/proc", "zygote start", "joining a sandbox", "driver zygote"],
)
async def test_a_run_passes_without_the_capability_and_the_log_says_what_was_left_out(
    what: str,
    run: Runner,
    make_job: JobFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.WARNING, logger="scenariokit")
    browser = discover_browser()  # found before PATH may lose it
    mode, note = take_away(what, monkeypatch, tmp_path)
    pool = WorkerPool(1, browser=browser, sandbox=SandboxConfig(mode=mode, pass_env=("RUNNER_TEST_MARK",)))
    try:
        await pool.start()
        outcome, _ = await run(make_job("print('ran without', helpers.env.get('url') is not None)"), pool)
        assert outcome.status == "pass", outcome.error

        def said_by_this_pool() -> bool:
            return any(("left out: " + said).startswith(note) for said in pool.left_out)

        # The driver zygote is tried in the background, once the snapshot is built. The session's shared
        # pool may be trying one too, and fail the same way: the note must be this pool's.
        for _ in range(600):
            if said_by_this_pool():
                break
            await asyncio.sleep(0.2)
        assert said_by_this_pool(), pool.left_out
        assert note in caplog.text
        if what == "bubblewrap":
            assert pool.sandbox_kind == "none"
        if what in ("pidfd", "/proc", "zygote start", "joining a sandbox"):
            assert pool.zygote is None
    finally:
        await pool.close()
        zygote_module.pidfd_problem.cache_clear()


async def test_bubblewrap_required_names_why_it_cannot_be_had(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "bwrap"  # a bwrap that cannot make a sandbox here (no user namespaces, say)
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        sandbox.SandboxUnavailable,
        match=f"SCENARIOKIT_SANDBOX=bubblewrap but {broken} cannot start a sandbox here: "
        "bwrap: No permissions to create new namespace",
    ):
        sandbox.resolve_sandbox("bubblewrap")
    assert sandbox.resolve_sandbox("auto") == "none"
    fallback = sandbox.sandbox_fallback("auto")
    assert fallback is not None and "No permissions to create new namespace" in fallback
    assert sandbox.sandbox_fallback("off") is None
