"""Processes sharing one database: `scenariokit serve` and `scenariokit worker`, killed and restarted.

These start the real command-line programs, so they prove the deployment story: runs are claimed with
leases, each exactly once; a process killed with SIGKILL leaves no run in progress for ever and no
Chromium behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from process_checks import alive, descendants, describe
from scenariokit.storage.sqlalchemy import unique_schema

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

PG_BASE_URL = os.environ.get("SCENARIOKIT_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
SCENARIOKIT = [sys.executable, "-m", "scenariokit.cli"]
LEASE_SECONDS = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Processes:
    """The scenariokit processes a test started; all are killed at the end."""

    def __init__(self, database_url: str, folder: Path) -> None:
        self.database_url = database_url
        self.folder = folder
        self.env = {
            **os.environ,
            "SCENARIOKIT_SECRET_KEY": "integration-secret",
            "SCENARIOKIT_LEASE_SECONDS": str(LEASE_SECONDS),
            "SCENARIOKIT_ARTIFACTS_DIR": str(folder / "artifacts"),
        }
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        log = (self.folder / f"process-{len(self.started)}.log").open("wb")
        process = subprocess.Popen(
            [*SCENARIOKIT, *args, "--database-url", self.database_url],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.folder,
        )
        self.started.append(process)
        return process

    def serve(self, port: int, *extra: str) -> subprocess.Popen[bytes]:
        return self.start("serve", "--port", str(port), "--workers", "1", *extra)

    def worker(self) -> subprocess.Popen[bytes]:
        return self.start("worker", "--workers", "1")

    def kill_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Api:
    """A small REST client of the server under test."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        async with self.session.request(method, f"{self.base}/api/v1{path}", json=body) as response:
            assert response.status < 300, (response.status, await response.text())
            return await response.json()

    async def wait_healthy(self, process: subprocess.Popen[bytes], seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert process.poll() is None, "the server exited"
            with contextlib.suppress(aiohttp.ClientError):
                async with self.session.get(f"{self.base}/health") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.25)
        raise AssertionError("the server did not become healthy")

    async def wait_run(self, run_id: str, seconds: float = 90, *, until: str = "finished") -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            run: dict[str, Any] = await self.call("GET", f"/run/{run_id}?limit=1000")
            if until == "finished" and run["status"] != "in_progress":
                return run
            if until == "claimed" and any(
                line["message"].startswith("claimed by") for line in run["logs"]["items"]
            ):
                return run
            await asyncio.sleep(0.25)
        raise AssertionError(f"run {run_id} did not get {until} in {seconds} s")

    async def scenario(self, site_url: str, code: str) -> tuple[str, str]:
        env = await self.call("POST", "/environments", {"name": "site", "data": {"url": site_url}})
        scenario = await self.call("POST", "/scenarios", {"name": "visit", "steps": [{"execCode": code}]})
        return scenario["id"], env["id"]

    async def queue(self, scenario_id: str, env_id: str) -> str:
        run = await self.call("POST", "/run", {"scenarioId": scenario_id, "environmentId": env_id})
        return str(run["id"])


def claimed_pid(run: dict[str, Any]) -> int:
    """The pid of the process whose scheduler claimed a run (its owner name is ``host:pid:nonce``)."""
    line = next(line["message"] for line in run["logs"]["items"] if line["message"].startswith("claimed by"))
    return int(line.split(":")[-2])


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    """Starts scenariokit processes for a test, and stops them whatever happens."""
    started: list[Processes] = []

    def make(database_url: str) -> Processes:
        made = Processes(database_url, tmp_path)
        started.append(made)
        return made

    yield make  # type: ignore[misc]
    for made in started:
        made.kill_all()


@pytest_asyncio.fixture(loop_scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


VISIT = "await page.goto(helpers.getEnvUrl())\nprint('visited')"
LINGER = "import asyncio\nprint('lingering')\nawait asyncio.sleep(60)"


@pytest.mark.postgres
async def test_two_workers_and_the_server_share_one_postgresql(
    processes: Any, http: aiohttp.ClientSession, site: Any
) -> None:
    schema = unique_schema("w")
    database_url = f"{PG_BASE_URL}?schema={schema}"
    procs: Processes = processes(database_url)
    upgrade = [*SCENARIOKIT, "db", "upgrade", "--database-url", database_url]
    await asyncio.to_thread(subprocess.run, upgrade, env=procs.env, check=True)
    port = _free_port()
    server = procs.serve(port, "--no-scheduler")
    workers = [procs.worker(), procs.worker()]
    api = Api(http, f"http://127.0.0.1:{port}")
    try:
        await api.wait_healthy(server)
        scenario_id, env_id = await api.scenario(site.url, VISIT)
        hits_before = site.hits.get("/", 0)
        run_ids = [await api.queue(scenario_id, env_id) for _ in range(20)]
        runs = [await api.wait_run(run_id) for run_id in run_ids]
        assert [run["status"] for run in runs] == ["pass"] * 20
        assert site.hits.get("/", 0) - hits_before == 20, "each run visited the page exactly once"
        owners = [claimed_pid(run) for run in runs]
        assert all(sum(line["message"] == "visited" for line in run["logs"]["items"]) == 1 for run in runs)
        assert set(owners) <= {w.pid for w in workers}

        # A worker killed mid-run: its run ends as worker_lost once the lease expires.
        lingering_id, _ = await api.scenario(site.url, LINGER)
        victim_run = await api.queue(lingering_id, env_id)
        claimed = await api.wait_run(victim_run, until="claimed")
        victim = next(w for w in workers if w.pid == claimed_pid(claimed))
        left_behind = descendants(victim.pid)
        assert left_behind, "the worker runs a pool process and a browser"
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        lost = await api.wait_run(victim_run, 60)
        assert lost["status"] == "fail" and lost["error"]["kind"] == "worker_lost"

        # The other worker keeps going.
        after = await api.wait_run(await api.queue(scenario_id, env_id))
        assert after["status"] == "pass"
        survivor = next(w for w in workers if w is not victim)
        assert claimed_pid(after) == survivor.pid

        deadline = time.monotonic() + 20
        while alive(left_behind) and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        assert not alive(left_behind), (
            f"the killed worker's pool process and Chromium exit with it: {describe(left_behind)}"
        )
    finally:
        procs.kill_all()
        from scenariokit.storage.opening import open_store

        store = await open_store(database_url, secret_key="integration-secret", migrate=False)
        await store.drop_schema()  # type: ignore[attr-defined]
        await store.close()


async def test_no_run_stays_in_progress_after_the_server_is_killed_and_restarted(
    processes: Any, http: aiohttp.ClientSession, site: Any, tmp_path: Path
) -> None:
    procs: Processes = processes(f"sqlite:///{tmp_path / 'restart.db'}")
    port = _free_port()
    api = Api(http, f"http://127.0.0.1:{port}")
    server = procs.serve(port)
    await api.wait_healthy(server)
    scenario_id, env_id = await api.scenario(site.url, LINGER)
    run_id = await api.queue(scenario_id, env_id)
    await api.wait_run(run_id, until="claimed")
    left_behind = descendants(server.pid)
    server.send_signal(signal.SIGKILL)
    server.wait()

    restarted = procs.serve(port)
    await api.wait_healthy(restarted)
    run = await api.wait_run(run_id, 60)
    assert run["status"] == "fail" and run["error"]["kind"] == "worker_lost"
    deadline = time.monotonic() + 20
    while alive(left_behind) and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
    assert not alive(left_behind), f"no Chromium of the killed server is left: {describe(left_behind)}"
