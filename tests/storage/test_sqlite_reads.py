"""SQLite reads run on the event loop's thread, and a writer in another process never holds them up.

A reading unit of work uses inline connections (no hop to aiosqlite's thread per call); that is safe
only because WAL readers do not wait for the write lock. These tests hold the write lock from another
process and read meanwhile: if a read waited for the lock, they would time out instead of passing.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

from json_services import json_services
from scenariokit.formats.queries import EnvironmentQuery
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
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
            assert writer.returncode is None  # still holding: the reads did not wait for it
        finally:
            writer.stdin.write(b"\n")
            await writer.stdin.drain()
            writer.stdin.close()
            await asyncio.wait_for(writer.wait(), 30)
        # the writer rolled back: nothing it did is visible, and writing works again
        await services.environments.update(env.id, {"description": "after the lock"})
        assert (await services.environments.get(env.id)).name == "staging"
    finally:
        await store.close()
