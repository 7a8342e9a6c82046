"""SQLite units of work run on the event loop's thread, and a writer in another process stops nothing.

Reads and writes use inline connections (no hop to aiosqlite's thread per call). That is safe only
because nothing inline waits for a lock: WAL readers never do, and a write that finds another process
holding the write lock moves to a threaded connection to wait there. These tests hold the write lock
from another process and read and write meanwhile: had anything waited on the loop, they would time
out instead of passing.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from json_services import json_services
from scenariokit.formats.queries import EnvironmentQuery
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import store as store_module
from scenariokit.storage.sqlalchemy.store import InlineSqliteConnection, SqlStore

HOLD_THE_WRITE_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE environments SET name = name || '-changed'")
print("holding", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


async def _opened(path: Path) -> SqlStore:
    store = await open_store(f"sqlite:///{path}", secret_key="test-secret-key")
    assert isinstance(store, SqlStore)
    return store


async def test_a_reading_unit_of_work_runs_its_queries_on_the_calling_thread(tmp_path: Path) -> None:
    store = await _opened(tmp_path / "reads.db")
    try:
        seen: list[int] = []

        def remember(*args: object) -> None:
            seen.append(threading.get_ident())

        async with store.unit_of_work(readonly=True) as uow:
            driver = (await uow._conn.get_raw_connection()).driver_connection  # type: ignore[union-attr]
            assert isinstance(driver, InlineSqliteConnection)
            driver._conn.set_trace_callback(remember)
            await uow.environments.list(EnvironmentQuery.from_params({}))
            driver._conn.set_trace_callback(None)
        # each statement sqlite ran came from the loop's own thread
        assert seen and set(seen) == {threading.get_ident()}
    finally:
        await store.close()


async def test_reads_answer_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = await _opened(path)
    services = json_services(Services(store))
    try:
        env = await services.environments.create({"name": "staging", "data": {"url": "http://127.0.0.1:1"}})
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HOLD_THE_WRITE_LOCK, str(path),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert writer.stdout is not None and writer.stdin is not None
        try:
            assert (await asyncio.wait_for(writer.stdout.readline(), 30)).strip() == b"holding"
            # the lock is held until the writer reads a line: each read must finish before that
            page = await asyncio.wait_for(services.environments.list(EnvironmentQuery.from_params({})), 10)
            got = await asyncio.wait_for(services.environments.get(env.id), 10)
            assert [item.name for item in page.items] == ["staging"] and got.name == "staging"
            # a write must wait for the lock: on a thread, so the loop goes on answering reads meanwhile
            waiting = asyncio.create_task(services.environments.update(env.id, {"description": "waited"}))
            # so must an insert, of one row and of several (the scenario's steps), on that thread's driver
            steps = [{"execCode": "log('one')"}, {"execCode": "log('two')"}]
            inserting = asyncio.create_task(services.scenarios.create({"name": "locked", "steps": steps}))
            await asyncio.sleep(0.3)
            assert not waiting.done() and not inserting.done()
            assert (await asyncio.wait_for(services.environments.get(env.id), 10)).description != "waited"
            assert writer.returncode is None  # still holding: the reads did not wait for it
        finally:
            writer.stdin.write(b"\n")
            await writer.stdin.drain()
            writer.stdin.close()
            await asyncio.wait_for(writer.wait(), 30)
        # the waiting write went through once the lock was free; the other process's rolled back
        await asyncio.wait_for(waiting, 30)
        stored = await services.environments.get(env.id)
        assert (stored.name, stored.description) == ("staging", "waited")
        created = await asyncio.wait_for(inserting, 30)
        scenario = await services.scenarios.get(created.id)
        assert [step.exec_code for step in scenario.steps] == ["log('one')", "log('two')"]
        await services.environments.update(env.id, {"description": "after the lock"})  # inline again
    finally:
        await store.close()


async def test_writes_run_inline_and_checkpoint_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await _opened(tmp_path / "writes.db")
    services = json_services(Services(store))
    checkpoints: list[int] = []
    real_checkpoint = store.checkpoint

    async def counted() -> None:
        checkpoints.append(1)
        await real_checkpoint()

    monkeypatch.setattr(store_module, "CHECKPOINT_EVERY_WRITES", 3)
    monkeypatch.setattr(store, "checkpoint", counted)
    try:
        async with store.unit_of_work() as uow:
            driver = (await uow._conn.get_raw_connection()).driver_connection  # type: ignore[union-attr]
            assert isinstance(driver, InlineSqliteConnection)
        for index in range(6):
            await services.environments.create({"name": f"env {index}", "data": {}})
        await asyncio.sleep(0.2)  # the checkpoint task runs on its own
        assert len(checkpoints) >= 1
        page = await services.environments.list(EnvironmentQuery.from_params({"limit": "50"}))
        assert page.total == 6
    finally:
        await store.close()


# --- reading connections kept between units of work --------------------------------------------------

COMMIT_A_RENAME = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("UPDATE environments SET name = 'renamed elsewhere'")
conn.close()
"""


def _sync(uow: object) -> object:
    conn = uow._conn  # type: ignore[attr-defined]
    return conn.sync_connection


async def test_a_reading_unit_of_work_hands_its_connection_to_the_next_which_reads_the_latest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kept.db"
    store = await _opened(path)
    services = json_services(Services(store))
    try:
        env = await services.environments.create({"name": "staging", "data": {"url": "http://127.0.0.1:1"}})
        async with store.unit_of_work(readonly=True) as uow:
            first, connection = _sync(uow), uow._conn
            assert (await uow.environments.get(env.id)).name == "staging"
        assert store.kept_reads is not None and store.kept_reads.connections == [connection]
        # written meanwhile through this store's writer, then by another process
        await services.environments.update(env.id, {"description": "written after"})
        async with store.unit_of_work(readonly=True) as uow:
            assert _sync(uow) is first, "the kept connection was not handed on"
            assert not uow._conn.in_transaction()  # type: ignore[union-attr]
            assert (await uow.environments.get(env.id)).description == "written after"
        other = await asyncio.create_subprocess_exec(sys.executable, "-c", COMMIT_A_RENAME, str(path))
        assert await other.wait() == 0
        async with store.unit_of_work(readonly=True) as uow:
            assert _sync(uow) is first
            assert (await uow.environments.get(env.id)).name == "renamed elsewhere"
    finally:
        await store.close()


async def test_a_reading_unit_of_work_that_failed_closes_its_connection(tmp_path: Path) -> None:
    store = await _opened(tmp_path / "failed.db")
    try:
        with pytest.raises(LookupError):
            async with store.unit_of_work(readonly=True) as uow:
                failed = uow._conn
                raise LookupError("the read went wrong")
        assert store.kept_reads is not None and store.kept_reads.connections == []
        assert failed is not None and failed.closed  # given back to the pool
    finally:
        await store.close()


async def test_at_most_kept_reads_are_kept_and_closing_the_store_closes_them(tmp_path: Path) -> None:
    store = await _opened(tmp_path / "many.db")
    pool = store.read_engine.sync_engine.pool
    readers = store_module.KEPT_READS + 2
    try:
        opened = [store.unit_of_work(readonly=True) for _ in range(readers)]
        units = [await unit.__aenter__() for unit in opened]  # all at once: one connection each
        assert len({id(_sync(unit)) for unit in units}) == readers
        for unit in opened:
            await unit.__aexit__(None, None, None)
        assert store.kept_reads is not None
        kept = store.kept_reads.connections
        assert len(kept) == store_module.KEPT_READS
        assert pool.checkedout() == store_module.KEPT_READS  # type: ignore[attr-defined]
    finally:
        await store.close()
    assert kept and all(conn.closed for conn in kept)
    async with store.unit_of_work(readonly=True):  # a read after the close keeps nothing
        pass
    assert store.kept_reads.connections == []
