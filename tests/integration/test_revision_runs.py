"""A run executes the revision it was queued with, even when its scenario is edited while it waits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

import scenariokit
from scenariokit.domain.model import RunStatus

pytestmark = [pytest.mark.browser]


async def test_a_queued_run_executes_the_code_it_was_queued_with(tmp_path: Path) -> None:
    gate = asyncio.Event()
    reached = asyncio.Event()

    async def held(request: web.Request) -> web.Response:
        reached.set()
        await gate.wait()
        return web.Response(text="<title>open</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/gate", held)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with scenariokit.open_kit(
            f"sqlite:///{tmp_path / 'kit.db'}", workers=1, artifacts_dir=tmp_path / "artifacts"
        ) as kit:
            env = await kit.environments.create(
                {"name": "local", "data": {"url": f"http://127.0.0.1:{port}/"}}
            )
            blocker = await kit.scenarios.create(
                {"name": "blocker", "steps": [{"execCode": "await page.goto(helpers.getEnvUrl() + 'gate')"}]}
            )
            checked = await kit.scenarios.create(
                {"name": "checked", "steps": [{"execCode": "print('the code as queued')"}]}
            )
            await kit.start_runner()
            busy = await kit.runs.create({"scenarioId": str(blocker.id), "environmentId": str(env.id)})
            await asyncio.wait_for(reached.wait(), 120)  # the only worker is busy with it
            queued = await kit.runs.create({"scenarioId": str(checked.id), "environmentId": str(env.id)})
            assert queued.scenario_revision == 1
            edited = await kit.scenarios.update_step(
                checked.id, checked.steps[0].id, {"execCode": "print('the code as edited')"}
            )
            assert edited.exec_code == "print('the code as edited')"
            assert (await kit.scenarios.get(checked.id)).revision == 2
            gate.set()
            done = await kit.services.runs.wait(queued.id, 120)
            first = await kit.services.runs.wait(busy.id, 120)
    finally:
        gate.set()
        await runner.cleanup()
    assert first.run.status is RunStatus.PASS, first.run.error
    assert done.run.status is RunStatus.PASS, done.run.error
    assert done.run.scenario_revision == 1
    messages = [line.message for line in done.logs.items] if done.logs else []
    assert "the code as queued" in messages and "the code as edited" not in messages
