"""The common snippets in real Chromium, through the runner, against pages served on 127.0.0.1.

The plugin reaches the worker processes through its entry point, as it does for a user.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from scenariokit_snippets_common import SNIPPETS, CommonSnippets

import scenariokit
from scenariokit import RunStatus
from scenariokit.runner.worker.plugin_hooks import PluginHooks

pytestmark = pytest.mark.asyncio(loop_scope="module")

PAGES = {
    "/login": """<!doctype html><title>Log in</title>
<input type="search" placeholder="Search the shop">
<form id="login"><label>E-mail <input type="email" name="email"></label>
<label>Password <input type="password" name="password"></label><button>Sign in</button></form>
<p id="status">signed out</p>
<script>document.getElementById("login").onsubmit = (event) => {
  event.preventDefault();
  const data = new FormData(event.target);
  document.getElementById("status").textContent = "welcome " + data.get("email") + "/" + data.get("password");
};</script>""",
    "/cookies": """<!doctype html><title>Shop</title>
<form><button type="button" onclick="this.textContent='clicked'">Accept</button></form>
<div class="cookie-notice">We use cookies. <button onclick="document.cookie='consent=yes';
  this.parentElement.remove()">Accept all</button></div>""",
    "/cookies-frame": """<!doctype html><title>Shop</title><iframe src="/consent"></iframe>""",
    "/consent": """<!doctype html><body><p>Your privacy</p>
<button onclick="document.cookie='consent=framed; path=/'">I agree</button></body>""",
    "/plain": """<!doctype html><title>Plain</title><button>Accept</button><p>No banner here.</p>""",
    "/slow": """<!doctype html><title>Slow</title><p id="data">loading</p>
<script>fetch("/api/slow").then((r) => r.text()).then((t) => document.getElementById("data").textContent = t);
</script>""",
    "/form": """<!doctype html><title>Form</title>
<label>Full name <input id="name"></label>
<label for="country">Country</label>
<select id="country"><option>Austria</option><option>Chile</option></select>
<label><input type="checkbox" id="news"> Subscribe</label>""",
}


async def handle(request: web.Request) -> web.Response:
    if request.path == "/api/slow":
        await asyncio.sleep(0.8)
        return web.Response(text="loaded")
    body = PAGES.get(request.path)
    if body is None:
        raise web.HTTPNotFound()
    return web.Response(text=body, content_type="text/html")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site() -> AsyncIterator[str]:
    """The pages, on a free port of 127.0.0.1; yields the base URL."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    yield f"http://127.0.0.1:{tcp._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    await runner.cleanup()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kit(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[scenariokit.Kit]:
    """A Kit with one worker, shared by the module."""
    folder = tmp_path_factory.mktemp("snippets")
    async with scenariokit.open_kit(
        f"sqlite:///{folder}/kit.db", artifacts_dir=folder / "artifacts"
    ) as opened:
        yield opened


async def run_steps(kit: scenariokit.Kit, site: str, *codes: str) -> Any:
    """Run the step codes as one scenario against the site; the finished run detail."""
    env = await kit.environments.create({"name": "site", "data": {"url": site}})
    scenario = await kit.scenarios.create({"name": "snippets", "steps": [{"execCode": c} for c in codes]})
    result = await kit.run(scenario.id, environment_id=env.id, timeout=90)
    assert result.run.status is RunStatus.PASS, result.run.error
    return result


async def test_hook_snippet_sources_serves_every_common_alias() -> None:
    sources = PluginHooks.load().snippet_sources()
    common = next(source for source in sources if isinstance(source, CommonSnippets))

    assert common.aliases() == sorted(SNIPPETS)
    assert all(alias.startswith("common.") for alias in common.aliases())
    assert common.get("common.login_form") == SNIPPETS["common.login_form"].code
    assert common.get("login") is None


@pytest.mark.browser
async def test_login_form_finds_the_fields_submits_and_takes_positional_or_named_options(
    kit: scenariokit.Kit, site: str
) -> None:
    await run_steps(
        kit,
        site,
        'url = await runSnippet("common.login_form", ["ann@example.com", "pw1", "/login"])\n'
        'assert url.endswith("/login"), url\n'
        'await expect(page.locator("#status")).to_have_text("welcome ann@example.com/pw1")',
        "await page.reload()\n"
        'await runSnippet("common.login_form", {"username": "bob@example.com", "password": "pw2",'
        ' "wait_for": "text=welcome bob@example.com/pw2"})',
    )


@pytest.mark.browser
async def test_accept_cookie_banner_clicks_a_banner_or_its_frame_and_leaves_other_buttons(
    kit: scenariokit.Kit, site: str
) -> None:
    await run_steps(
        kit,
        site,
        'await page.goto(helpers.getEnvUrl() + "/cookies")\n'
        'assert await runSnippet("common.accept_cookie_banner") is True\n'
        'assert "consent=yes" in await page.evaluate("document.cookie")\n'
        'await expect(page.get_by_role("button", name="Accept", exact=True)).to_have_text("Accept")',
        'await page.goto(helpers.getEnvUrl() + "/cookies-frame")\n'
        'assert await runSnippet("common.accept_cookie_banner", {"timeout": 3000}) is True\n'
        'assert "consent=framed" in await page.evaluate("document.cookie")',
        'await page.goto(helpers.getEnvUrl() + "/plain")\n'
        'assert await runSnippet("common.accept_cookie_banner", [300]) is False',
    )


@pytest.mark.browser
async def test_wait_for_network_idle_waits_for_late_requests(kit: scenariokit.Kit, site: str) -> None:
    await run_steps(
        kit,
        site,
        'await page.goto(helpers.getEnvUrl() + "/slow", wait_until="domcontentloaded")\n'
        'await runSnippet("common.wait_for_network_idle", {"timeout": 10000})\n'
        'assert await page.locator("#data").text_content() == "loaded"',
    )


@pytest.mark.browser
async def test_fill_form_fills_text_selects_and_checkboxes_by_label(kit: scenariokit.Kit, site: str) -> None:
    await run_steps(
        kit,
        site,
        'await page.goto(helpers.getEnvUrl() + "/form")\n'
        'count = await runSnippet("common.fill_form", [{"Full name": "Ann", "Country": "Chile",'
        ' "Subscribe": True}])\n'
        "assert count == 3\n"
        'await expect(page.locator("#name")).to_have_value("Ann")\n'
        'await expect(page.locator("#country")).to_have_value("Chile")\n'
        'await expect(page.locator("#news")).to_be_checked()',
    )
