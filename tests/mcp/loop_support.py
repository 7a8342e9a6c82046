"""What the agent-loop tests share: a shop whose button label changes overnight, and its nightly check.

The check passes against the shop as it was, then fails once the shop renames its button: the red
nightly run an agent is asked to repair (docs/mcp.md, "Repairing a failing check").
"""

from __future__ import annotations

import contextlib
import html
import uuid
from collections.abc import AsyncIterator

import attrs
from aiohttp import web

from scenariokit.domain.model import RunStatus
from scenariokit.formats.inputs import EnvironmentInput, RunInput, ScenarioInput, StepInput
from scenariokit.services import Services

OLD_LABEL = "Add to cart"
NEW_LABEL = "Buy now"
OPEN = "await page.goto(helpers.getEnvUrl())"
CLICK = f'await expect(page.get_by_role("button", name="{OLD_LABEL}")).to_be_visible(timeout=3000)'
FIXED_CLICK = CLICK.replace(OLD_LABEL, NEW_LABEL)
#: A run of two quick steps ends well within this, on a loaded machine too.
WAIT_SECONDS = 120


@attrs.define
class Shop:
    """The shop on 127.0.0.1: its URL and the label its button shows now."""

    url: str = ""
    label: str = OLD_LABEL


@contextlib.asynccontextmanager
async def shop_site() -> AsyncIterator[Shop]:
    """Serve the shop on a free 127.0.0.1 port."""
    shop = Shop()

    async def page(request: web.Request) -> web.Response:
        body = (
            "<!doctype html><html><head><title>Shop</title></head><body><h1>Shop</h1>"
            f"<button>{html.escape(shop.label)}</button></body></html>"
        )
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    shop.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield shop
    finally:
        await runner.cleanup()


@attrs.frozen
class NightlyCheck:
    """The check that went red: its scenario, environment and the failed run's id."""

    scenario_id: uuid.UUID
    environment_id: uuid.UUID
    passed_run_id: uuid.UUID
    failed_run_id: uuid.UUID


async def red_nightly_check(services: Services, shop: Shop) -> NightlyCheck:
    """The check, run once green against the shop, then red after the shop renamed its button."""
    environment = await services.environments.create(EnvironmentInput(name="shop", data={"url": shop.url}))
    scenario = await services.scenarios.create(
        ScenarioInput(
            name="Cart button",
            environment_id=environment.id,
            steps=(
                StepInput(exec_code=OPEN, title="Open the shop"),
                StepInput(exec_code=CLICK, title="Cart"),
            ),
        )
    )
    runs = []
    for label, status in ((OLD_LABEL, RunStatus.PASS), (NEW_LABEL, RunStatus.FAIL)):
        shop.label = label
        run = await services.runs.create(RunInput(scenario_id=scenario.id, environment_id=environment.id))
        detail = await services.runs.wait(run.id, WAIT_SECONDS)
        assert detail.run.status is status, detail.run
        runs.append(run.id)
    return NightlyCheck(scenario.id, environment.id, runs[0], runs[1])
