"""Runner fixtures: a demo site on 127.0.0.1, one worker pool shared by the session, and job builders.

Every browser the tests start carries a marker in its environment (passed through the workers'
minimal environment by name), so the session can prove at the end that none of them outlived the pools.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import pytest_asyncio

from scenariokit.domain.job import RunEvent, RunFinished, RunJob, SessionReleased, StepJob, StepStarted
from scenariokit.runner.confinement.cgroups import run_group_members
from scenariokit.runner.confinement.processes import process_table, process_tree
from scenariokit.runner.confinement.sandbox import SandboxConfig
from scenariokit.runner.parent.executor import WorkerPool
from served_pages import serve_pages

MARKER_ENV = "RUNNER_TEST_MARK"

HOME_PAGE = """<!doctype html>
<html><head><title>Demo</title></head>
<body>
  <h1>Welcome</h1>
  <p id="status">checking…</p>
  <script>
    document.getElementById("status").textContent =
      localStorage.getItem("token") ? "logged in" : "logged out";
  </script>
</body></html>
"""

LOGIN_PAGE = """<!doctype html>
<html><head><title>Log in</title></head>
<body>
  <form id="login">
    <label>Username <input id="username" name="username"></label>
    <label>Password <input id="password" name="password" type="password"></label>
    <button type="submit">Log in</button>
  </form>
  <p id="status">logged out</p>
  <script>
    document.getElementById("login").addEventListener("submit", (event) => {
      event.preventDefault();
      const user = document.getElementById("username").value;
      const ok = user && document.getElementById("password").value;
      if (!ok) { document.getElementById("status").textContent = "wrong password"; return; }
      localStorage.setItem("token", "tok-" + user + "-0123456789");
      document.cookie = "sessionid=cookie-" + user + "; path=/";
      document.getElementById("status").textContent = "logged in";
    });
  </script>
</body></html>
"""

PAGES = {"/": HOME_PAGE, "/login": LOGIN_PAGE}


@pytest.fixture(scope="session")
def site() -> Iterator[str]:
    """The demo site's base URL: ``/`` shows "logged in" once ``/login`` has stored a token."""
    with serve_pages(PAGES) as base:
        yield base


def _marked_browser_pids(marker: str) -> set[int]:
    """Live Chromium processes started under this test session's marker."""
    found = set()
    for pid, info in process_table().items():
        if info.zombie:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        program = cmdline.split(b"\0", 1)[0]  # not its arguments: the driver zygote names the browser
        if f"{MARKER_ENV}={marker}".encode() in environ and b"chrom" in program.lower():
            found.add(pid)
    return found


def _wait_until_gone(pids: set[int], timeout: float = 5.0) -> set[int]:
    """The pids still alive (zombies count as gone) after waiting up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        table = process_table()
        alive = {pid for pid in pids if pid in table and not table[pid].zombie}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def marked_sandbox() -> SandboxConfig:
    """The sandbox settings of the environment, with the browser marker passed to the workers."""
    return SandboxConfig.from_env(pass_env=(MARKER_ENV,))


@pytest.fixture
def marked_sandbox_with() -> Callable[..., SandboxConfig]:
    """The environment's sandbox settings with the browser marker and ``*names`` passed, ``**fields`` set."""
    return lambda *names, **fields: attrs.evolve(marked_sandbox(), pass_env=(MARKER_ENV, *names), **fields)


@pytest.fixture(scope="session")
def browser_marker() -> Iterator[str]:
    """Marks every browser the session starts; at the end, none of them may be left running."""
    marker = uuid.uuid4().hex
    os.environ[MARKER_ENV] = marker
    yield marker
    leftovers = _wait_until_gone(_marked_browser_pids(marker))
    assert not leftovers, f"Chromium processes left behind by the runner tests: {sorted(leftovers)}"


@pytest.fixture
def browsers_started_by(browser_marker: str) -> Callable[[int], set[int]]:
    """The Chromium processes a worker (given by its pid, which is its process group) started: those
    of its process tree, and those of its run's control group (a driver the driver zygote forked is
    the zygote's child, and so its browser, but it joins the run's group)."""

    def started_by(worker_pid: int) -> set[int]:
        group = run_group_members(worker_pid) or set()
        return (process_tree(worker_pid) | group) & _marked_browser_pids(browser_marker)

    return started_by


@pytest.fixture
def wait_until_gone() -> Callable[[set[int]], set[int]]:
    """Wait for processes to end; returns those still alive after five seconds."""
    return _wait_until_gone


@pytest.fixture(scope="session")
def released_sessions() -> list[SessionReleased]:
    """Every SessionReleased the shared pool reported."""
    return []


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def pool(browser_marker: str, released_sessions: list[SessionReleased]) -> AsyncIterator[WorkerPool]:
    """One pool of two workers for the whole session."""

    async def remember(released: SessionReleased) -> None:
        released_sessions.append(released)

    shared = WorkerPool(2, on_session_released=remember, sandbox=marked_sandbox())
    await shared.start()
    yield shared
    await shared.close()


@pytest_asyncio.fixture(loop_scope="session")
async def full_pool(pool: WorkerPool) -> WorkerPool:
    """The shared pool once a warm worker waits for each slot (runs before used theirs up)."""
    for _ in range(300):
        if pool.ready_workers >= pool.size:
            return pool
        await asyncio.sleep(0.1)
    raise AssertionError(f"only {pool.ready_workers} of {pool.size} workers came up within 30 s")


JobFactory = Callable[..., RunJob]


@pytest.fixture
def make_job(site: str, tmp_path: Path) -> JobFactory:
    """Build a job from step code strings (or StepJobs); keyword arguments set RunJob fields.

    ``step_timeout`` sets every step's limit (default 10 s); the environment points at the demo site.
    """

    def build(*steps: str | StepJob, step_timeout: float = 10.0, **fields: Any) -> RunJob:
        step_jobs = tuple(
            step
            if isinstance(step, StepJob)
            else StepJob(
                id=uuid.uuid4(),
                order=order,
                title=f"Step {order}",
                exec_code=step,
                timeout_seconds=step_timeout,
            )
            for order, step in enumerate(steps, start=1)
        )
        values: dict[str, Any] = {
            "run_id": uuid.uuid4(),
            "scenario_id": uuid.uuid4(),
            "scenario_name": "demo",
            "steps": step_jobs,
            "env_name": "local",
            "env_data": {"url": site, "loginUrl": f"{site}/login", "greeting": "Welcome"},
            "artifacts_dir": tmp_path / "artifacts",
        }
        values.update(fields)
        return RunJob(**values)

    return build


Runner = Callable[..., Awaitable[tuple[RunFinished, list[RunEvent]]]]


@pytest.fixture
def run(pool: WorkerPool) -> Runner:
    """Execute a job on the shared pool (or the one given): its outcome and every event, in order."""

    async def execute(job: RunJob, on: WorkerPool | None = None) -> tuple[RunFinished, list[RunEvent]]:
        events: list[RunEvent] = []

        async def collect(event: RunEvent) -> None:
            events.append(event)

        outcome = await (on or pool).execute(job, collect)
        return outcome, events

    return execute


#: ``start(job) -> the run's future``, returned once its first step has started
Starter = Callable[[RunJob], Awaitable["asyncio.Future[RunFinished]"]]


@pytest.fixture
def start_run(pool: WorkerPool) -> Starter:
    """Start a job on the shared pool and return its outcome's future once its first step has started."""

    async def start(job: RunJob) -> asyncio.Future[RunFinished]:
        started = asyncio.Event()

        async def on_event(event: RunEvent) -> None:
            if isinstance(event, StepStarted):
                started.set()

        running = asyncio.ensure_future(pool.execute(job, on_event))
        await asyncio.wait_for(started.wait(), 30)
        return running

    return start
