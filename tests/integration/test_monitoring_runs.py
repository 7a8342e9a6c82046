"""Monitoring end to end on SQLite and PostgreSQL: retries (each attempt in a fresh browser, the backoff
kept between) and a batch of runs against several environments."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from scenariokit.domain.model import RunErrorKind, RunStatus
from scenariokit.formats.inputs import RunBatchInput, RunInput
from scenariokit.kit import Kit
from scenariokit.services import RunSettings, Services
from scenariokit.storage.sqlalchemy import SqlStore

pytestmark = pytest.mark.browser

HELLO = "<!doctype html><title>up</title><h1>Hello</h1>"
NOT_YET = "<!doctype html><title>down</title><h1>Not yet</h1>"


class FlakySite:
    """A page that fails its check on the first ``failures`` hits and passes after."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.hits = 0
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        body = NOT_YET if self.hits <= self.failures else HELLO
        return web.Response(text=body, content_type="text/html")


async def _serve(site: FlakySite) -> web.AppRunner:
    app = web.Application()
    app.router.add_get("/{tail:.*}", site.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    site.url = f"http://127.0.0.1:{tcp._server.sockets[0].getsockname()[1]}/"  # type: ignore[union-attr]
    return runner


@pytest.fixture
async def kit(store: SqlStore, tmp_path: Path) -> AsyncIterator[Any]:
    """A kit over the test store (both backends) with one worker; the store is the fixture's to close."""
    services = Services(store, settings=RunSettings(artifacts_dir=tmp_path / "artifacts"))
    opened = Kit(services, workers=1)
    scheduler = await opened.start_runner()
    try:
        yield opened
    finally:
        await scheduler.close()


CHECK = (
    "await page.goto(helpers.getEnvUrl())\n"
    "await expect(page.get_by_text('Hello')).to_be_visible(timeout=1000)"
)


async def _scenario(kit: Any, site: FlakySite, retries: dict[str, Any]) -> tuple[Any, Any]:
    environment = await kit.environments.create({"name": "site", "data": {"url": site.url}})
    scenario = await kit.scenarios.create(
        {"name": "check", "retries": retries, "steps": [{"title": "hello", "execCode": CHECK}]}
    )
    return scenario, environment


async def test_a_page_failing_on_its_first_hit_passes_flaky_on_the_second_attempt(kit: Any) -> None:
    site = FlakySite(failures=1)
    runner = await _serve(site)
    try:
        scenario, environment = await _scenario(
            kit, site, {"count": 2, "backoff": "fixed", "backoffSeconds": 1}
        )
        detail = await kit.run(scenario.id, environment_id=environment.id, timeout=90)
    finally:
        await runner.cleanup()
    run = detail.run
    assert run.status is RunStatus.PASS and run.flaky is True, run.error
    assert [(a.attempt, a.status) for a in run.attempts] == [(1, RunStatus.FAIL), (2, RunStatus.PASS)]
    first, second = run.attempts
    assert first.error is not None and first.error.kind is RunErrorKind.ASSERTION
    assert first.finished_at is not None and second.started_at is not None
    assert (second.started_at - first.finished_at).total_seconds() >= 1.0  # the backoff was kept
    assert second.step_results == run.step_results and site.hits == 2
    logged = [line.message for line in detail.logs.items]
    assert any("attempt 1 failed (assertion); trying again in 1 s" in line for line in logged), logged


async def test_a_run_failing_every_attempt_fails_and_a_cancel_ends_its_backoff(kit: Any) -> None:
    site = FlakySite(failures=100)
    runner = await _serve(site)
    try:
        scenario, environment = await _scenario(
            kit, site, {"count": 1, "backoff": "linear", "backoffSeconds": 0.2}
        )
        detail = await kit.run(scenario.id, environment_id=environment.id, timeout=90)
        run = detail.run
        assert run.status is RunStatus.FAIL and run.flaky is False
        assert [a.status for a in run.attempts] == [RunStatus.FAIL, RunStatus.FAIL] and site.hits == 2

        await kit.scenarios.update(scenario.id, {"retries": {"count": 3, "backoffSeconds": 600}})
        waiting = await kit.services.runs.create(
            RunInput(scenario_id=scenario.id, environment_id=environment.id)
        )
        for _ in range(300):  # until the first attempt failed and the run waits out its backoff
            current = (await kit.services.runs.get(waiting.id)).run
            if current.attempts:
                break
            await asyncio.sleep(0.1)
        assert current.attempts and not current.finished
        began = asyncio.get_running_loop().time()
        await kit.services.runs.cancel(waiting.id)
        ended = await kit.services.runs.wait(waiting.id, 10)
    finally:
        await runner.cleanup()
    assert asyncio.get_running_loop().time() - began < 5  # not the 600 s backoff
    assert ended.run.status is RunStatus.FAIL and ended.run.error is not None
    assert ended.run.error.kind is RunErrorKind.CANCELLED
    assert [a.status for a in ended.run.attempts] == [RunStatus.FAIL, RunStatus.FAIL]


async def test_a_three_environment_batch_runs_once_against_each(kit: Any) -> None:
    sites = [FlakySite(failures=failures) for failures in (0, 100, 0)]
    runners = [await _serve(site) for site in sites]
    try:
        environments = [
            await kit.environments.create({"name": f"site-{i}", "data": {"url": site.url}})
            for i, site in enumerate(sites)
        ]
        scenario = await kit.scenarios.create({"name": "check", "steps": [{"execCode": CHECK}]})
        ids = tuple(environment.id for environment in environments)
        batch = await kit.services.runs.create_batch(
            RunBatchInput(scenario_id=scenario.id, environment_ids=ids)
        )
        done = await kit.services.runs.wait_batch(batch, 90)
    finally:
        for runner in runners:
            await runner.cleanup()
    assert [detail.run.environment_id for detail in done.runs] == list(ids)
    assert [detail.run.status for detail in done.runs] == [RunStatus.PASS, RunStatus.FAIL, RunStatus.PASS]
    assert {detail.run.batch_id for detail in done.runs} == {batch.batch_id}
    assert [site.hits for site in sites] == [1, 1, 1]
