"""Lifecycle hooks fire after the commit: a hook that reads the run back from the store sees its result.

The hook reads through a connection of its own (another thread, another engine), so it sees only what
is committed: a hook fired inside the writing transaction would read the run still ``in_progress``.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import attrs
import sqlalchemy as sa

from json_services import json_services
from scenariokit.domain.job import RunFinished
from scenariokit.domain.model import Run, RunErrorKind, RunStatus, Scenario, utcnow
from scenariokit.plugins import get_plugin_manager, hookimpl
from scenariokit.services import Services
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t


def _stored_status(url: str, run_id: uuid.UUID) -> str | None:
    """The run's status as committed, read on a connection of its own in a thread of its own."""
    found: dict[str, Any] = {}

    async def read() -> None:
        reader = SqlStore(url, secret_key="test-secret-key")
        try:
            async with reader.engine.connect() as conn:
                query = sa.select(t.runs.c.status).where(t.runs.c.id == run_id)
                found["status"] = (await conn.execute(query)).scalar_one_or_none()
        finally:
            await reader.close()

    def run_reader() -> None:
        try:
            asyncio.run(read())
        except BaseException as exc:
            found["error"] = exc

    thread = threading.Thread(target=run_reader)
    thread.start()
    thread.join(timeout=60)
    if "error" in found:
        raise found["error"]
    return found.get("status")


@attrs.define
class _ReadsBack:
    """A plugin whose run hooks read the run back from the store."""

    url: str
    finished: list[tuple[str, str | None]] = attrs.field(factory=list)
    started: list[str | None] = attrs.field(factory=list)

    @hookimpl
    def scenariokit_run_started(self, run: Run, scenario: Scenario) -> None:
        self.started.append(_stored_status(self.url, run.id))

    @hookimpl
    def scenariokit_run_finished(self, run: Run, scenario: Scenario) -> None:
        self.finished.append((run.status.value, _stored_status(self.url, run.id)))


def _services(store: SqlStore, database_url: str) -> tuple[Services, _ReadsBack]:
    manager = get_plugin_manager(load_entry_points=False)
    plugin = _ReadsBack(database_url)
    manager.register(plugin)
    return json_services(Services(store, plugins=manager)), plugin


async def _queue(services: Services) -> uuid.UUID:
    env = await services.environments.create({"name": "env", "data": {"url": "http://127.0.0.1:9"}})
    scenario = await services.scenarios.create({"name": "s", "steps": [{"execCode": "pass"}]})
    run = await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    return run.id


async def test_run_started_and_finished_via_finish_see_the_stored_run(
    store: SqlStore, database_url: str
) -> None:
    services, plugin = _services(store, database_url)
    run_id = await _queue(services)
    assert await services.runs.claim("w") is not None
    now = utcnow()
    outcome = RunFinished(status="pass", error=None, step_results=(), started_at=now, finished_at=now)

    await services.runs.finish(run_id, outcome)

    assert plugin.started == ["in_progress"]
    assert plugin.finished == [("pass", "pass")], "the hook read the committed outcome"


async def test_run_finished_via_fail_sees_the_stored_failure(store: SqlStore, database_url: str) -> None:
    services, plugin = _services(store, database_url)
    run_id = await _queue(services)
    assert await services.runs.claim("w") is not None

    await services.runs.fail(run_id, RunErrorKind.ERROR, "the worker could not store its outcome")

    assert plugin.finished == [("fail", "fail")]


async def test_run_finished_via_reap_sees_the_stored_failure(store: SqlStore, database_url: str) -> None:
    services, plugin = _services(store, database_url)
    run_id = await _queue(services)
    services.context.settings = attrs.evolve(services.context.settings, lease_seconds=0.05)
    assert await services.runs.claim("gone-worker") is not None
    await asyncio.sleep(0.1)

    assert await services.runs.reap_expired() == [run_id]

    assert plugin.finished == [("fail", "fail")]
    assert (await services.runs.get(run_id)).run.status is RunStatus.FAIL


async def test_run_finished_via_cancel_sees_the_stored_cancel(store: SqlStore, database_url: str) -> None:
    services, plugin = _services(store, database_url)
    run_id = await _queue(services)

    await services.runs.cancel(run_id)

    assert plugin.finished == [("fail", "fail")]
