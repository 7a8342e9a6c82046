"""Drain on SIGTERM: the real ``scenariokit serve`` and ``scenariokit worker`` stopped with runs under way.

A first SIGTERM stops claiming, answers ``/health`` 503 ``draining`` and lets the runs under way finish
for up to ``SCENARIOKIT_DRAIN_SECONDS``; what does not finish goes back to the queue (never
``worker_lost``), and another scheduler sharing the store runs it. A second signal stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from test_worker_processes import PG_BASE_URL, SCENARIOKIT, Api, Processes, _free_port, claimed_pid

from process_checks import alive, descendants, describe
from scenariokit.formats.presenters import RunDetail
from scenariokit.formats.queries import LogQuery
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import unique_schema

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

#: A run that takes a few seconds, then visits the site once and says so.
SLOW = (
    "import asyncio\nprint('started')\nawait asyncio.sleep({seconds})\n"
    "await page.goto(helpers.getEnvUrl())\nprint('visited')"
)
HANDED_BACK = "handed back to the queue"
#: How long a server may take to start on a machine shared with other test runs.
STARTUP_SECONDS = 180


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[[str], Processes]]:
    """Starts scenariokit processes for a test (on one database URL), and stops them whatever happens."""
    started: list[Processes] = []

    def make(database_url: str) -> Processes:
        made = Processes(database_url, tmp_path)
        started.append(made)
        return made

    yield make
    for made in started:
        made.kill_all()


@pytest_asyncio.fixture(loop_scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def stored_run(procs: Processes, run_id: str) -> RunDetail:
    """The run as the store holds it (read with no server running)."""
    store = await open_store(
        procs.database_url, secret_key=procs.env["SCENARIOKIT_SECRET_KEY"], migrate=False
    )
    try:
        return await Services(store).runs.get(uuid.UUID(run_id), LogQuery(limit=1000))
    finally:
        await store.close()


async def wait_exit(process: subprocess.Popen[bytes], seconds: float = 120) -> int:
    return await asyncio.to_thread(process.wait, seconds)


async def health_during_drain(api: Api, process: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    """What ``/health`` answers once the server drains (None if it exited before answering so)."""
    while process.poll() is None:
        with contextlib.suppress(aiohttp.ClientError):
            async with api.session.get(f"{api.base}/health") as response:
                body: dict[str, Any] = await response.json()
                if body["status"] == "draining":
                    assert response.status == 503
                    return body
        await asyncio.sleep(0.1)
    return None


def output_of(procs: Processes, index: int) -> str:
    return (procs.folder / f"process-{index}.log").read_text(errors="replace")


async def test_a_run_in_flight_at_sigterm_finishes_and_passes(
    processes: Any, http: aiohttp.ClientSession, site: Any, tmp_path: Path
) -> None:
    procs: Processes = processes(f"sqlite:///{tmp_path / 'drain.db'}")
    procs.env["SCENARIOKIT_DRAIN_SECONDS"] = "90"
    port = _free_port()
    api = Api(http, f"http://127.0.0.1:{port}")
    server = procs.serve(port)
    await api.wait_healthy(server, STARTUP_SECONDS)
    scenario_id, env_id = await api.scenario(site.url, SLOW.format(seconds=6))
    hits_before = site.hits.get("/", 0)
    run_id = await api.queue(scenario_id, env_id)
    await api.wait_run(run_id, until="claimed")
    started = descendants(server.pid)

    server.send_signal(signal.SIGTERM)
    health = await health_during_drain(api, server)
    assert health is not None, "the server answered /health 503 draining while its run finished"
    # it no longer takes runs: one queued now waits for the next scheduler
    later = await api.queue(scenario_id, env_id)
    assert await wait_exit(server) == 0, output_of(procs, 0)

    run = await stored_run(procs, run_id)
    assert run.run.status.value == "pass", run.run.error
    assert [line.message for line in run.logs.items].count("visited") == 1
    assert not any(HANDED_BACK in line.message for line in run.logs.items)
    assert site.hits.get("/", 0) - hits_before == 1
    waiting = await stored_run(procs, later)
    assert waiting.run.status.value == "in_progress" and waiting.run.started_at is None
    assert "Traceback" not in output_of(procs, 0)
    await _all_gone(started)


@contextlib.asynccontextmanager
async def _on_postgres(processes: Callable[[str], Processes], name: str) -> AsyncIterator[Processes]:
    """Processes over a migrated PostgreSQL schema of their own; killed, and the schema dropped, after."""
    database_url = f"{PG_BASE_URL}?schema={unique_schema(name)}"
    procs = processes(database_url)
    await asyncio.to_thread(
        subprocess.run,
        [*SCENARIOKIT, "db", "upgrade", "--database-url", database_url],
        env=procs.env,
        check=True,
    )
    try:
        yield procs
    finally:
        procs.kill_all()
        store = await open_store(database_url, secret_key=procs.env["SCENARIOKIT_SECRET_KEY"], migrate=False)
        await store.drop_schema()  # type: ignore[attr-defined]
        await store.close()


@pytest.mark.postgres
async def test_a_run_longer_than_the_drain_is_handed_back_and_the_other_server_runs_it_once(
    processes: Any, http: aiohttp.ClientSession, site: Any
) -> None:
    async with _on_postgres(processes, "drain") as procs:
        procs.env["SCENARIOKIT_DRAIN_SECONDS"] = "1"
        ports = [_free_port(), _free_port()]
        servers = [procs.serve(port) for port in ports]
        apis = [Api(http, f"http://127.0.0.1:{port}") for port in ports]
        for api, server in zip(apis, servers, strict=True):
            await api.wait_healthy(server, STARTUP_SECONDS)
        scenario_id, env_id = await apis[0].scenario(site.url, SLOW.format(seconds=8))
        hits_before = site.hits.get("/", 0)
        run_id = await apis[0].queue(scenario_id, env_id)
        claimed = await apis[0].wait_run(run_id, until="claimed")
        first = next(server for server in servers if server.pid == claimed_pid(claimed))
        second, api = next((s, a) for s, a in zip(servers, apis, strict=True) if s is not first)

        first.send_signal(signal.SIGTERM)  # a rolling restart: the server running the run goes
        assert await wait_exit(first) == 0, output_of(procs, servers.index(first))
        run = await api.wait_run(run_id, 120)

        assert run["status"] == "pass", run["error"]
        assert run["error"] is None and len(run["attempts"]) == 1  # one attempt: the one that ran whole
        messages = [line["message"] for line in run["logs"]["items"]]
        owners = [int(m.split(":")[-2]) for m in messages if m.startswith("claimed by")]
        assert owners == [first.pid, second.pid], messages
        handed = [m for m in messages if HANDED_BACK in m]
        assert len(handed) == 1 and "drain of 1 s" in handed[0], messages
        assert messages.count("visited") == 1, "the run went to completion once"
        assert site.hits.get("/", 0) - hits_before == 1
        assert "worker_lost" not in " ".join(messages)
        assert "Traceback" not in output_of(procs, servers.index(first))


@pytest.mark.postgres
async def test_scenariokit_worker_drains_the_same_way(
    processes: Any, http: aiohttp.ClientSession, site: Any
) -> None:
    async with _on_postgres(processes, "wdrain") as procs:
        port = _free_port()
        api = Api(http, f"http://127.0.0.1:{port}")
        server = procs.serve(port, "--no-scheduler")
        procs.env["SCENARIOKIT_DRAIN_SECONDS"] = "90"
        worker = procs.worker()
        await api.wait_healthy(server, STARTUP_SECONDS)
        scenario_id, env_id = await api.scenario(site.url, SLOW.format(seconds=3))
        run_id = await api.queue(scenario_id, env_id)
        claimed = await api.wait_run(run_id, 120, until="claimed")
        assert claimed_pid(claimed) == worker.pid
        started = descendants(worker.pid)

        worker.send_signal(signal.SIGTERM)
        later = await api.queue(scenario_id, env_id)  # queued while it drains: left for another worker
        assert await wait_exit(worker) == 0, output_of(procs, 1)
        run = await api.wait_run(run_id, 10)
        assert run["status"] == "pass", run["error"]
        assert not any(HANDED_BACK in line["message"] for line in run["logs"]["items"])
        waiting = await api.call("GET", f"/run/{later}")
        assert waiting["status"] == "in_progress" and waiting["startedAt"] is None
        assert "Traceback" not in output_of(procs, 1)
        await _all_gone(started)


async def test_a_second_sigterm_stops_at_once_and_hands_the_run_back(
    processes: Any, http: aiohttp.ClientSession, site: Any, tmp_path: Path
) -> None:
    procs: Processes = processes(f"sqlite:///{tmp_path / 'twice.db'}")
    procs.env["SCENARIOKIT_DRAIN_SECONDS"] = "600"
    port = _free_port()
    api = Api(http, f"http://127.0.0.1:{port}")
    server = procs.serve(port)
    await api.wait_healthy(server, STARTUP_SECONDS)
    scenario_id, env_id = await api.scenario(site.url, SLOW.format(seconds=600))
    run_id = await api.queue(scenario_id, env_id)
    await api.wait_run(run_id, until="claimed")
    started = descendants(server.pid)

    server.send_signal(signal.SIGTERM)
    assert await health_during_drain(api, server) is not None
    server.send_signal(signal.SIGTERM)  # the operator will not wait ten minutes
    assert await wait_exit(server, 60) == 0, output_of(procs, 0)

    run = await stored_run(procs, run_id)
    told = "\n".join(f"{line.at:%H:%M:%S.%f} {line.message}" for line in run.logs.items)
    assert run.run.status.value == "in_progress" and run.run.started_at is None, (
        f"not queued again: {run.run.error}\nthe run's log:\n{told}\nthe server's:\n{output_of(procs, 0)}"
    )
    assert run.run.error is None and run.run.step_results == ()
    handed = [line.message for line in run.logs.items if HANDED_BACK in line.message]
    assert len(handed) == 1 and "cut short" in handed[0]
    assert "Traceback" not in output_of(procs, 0)
    await _all_gone(started)


async def _all_gone(pids: set[int]) -> None:
    """Every process the stopped command had started (workers, browsers) exits with it."""
    deadline = time.monotonic() + 20
    while alive(pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
    assert not alive(pids), describe(pids)
