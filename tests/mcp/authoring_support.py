"""What the authoring tests share: a login site whose button label can change, and its credential."""

from __future__ import annotations

import contextlib
import html
from collections.abc import AsyncIterator

import attrs
from aiohttp import web

from scenariokit.formats.inputs import CredentialInput
from scenariokit.services import Services

USERNAME = "ada"
#: with a space and a quote, so that every encoding of it differs
PASSWORD = 'Open Sesame"42'

LOGIN_PAGE = """<!doctype html>
<html><head><title>Shop login</title></head><body>
<h1>Sign in to the shop</h1>
<form id="login">
  <label>User <input id="user" name="user"></label>
  <label>Password <input id="pw" name="pw" type="password"></label>
  <button type="submit">{label}</button>
</form>
<p role="status" id="out"></p>
<script>
document.getElementById("login").addEventListener("submit", async (event) => {{
  event.preventDefault();
  const body = new URLSearchParams(new FormData(event.target));
  const answer = await fetch("/login", {{method: "POST", body}});
  document.getElementById("out").textContent = await answer.text();
}});
</script>
</body></html>
"""


@attrs.define
class LoginSite:
    """A login page on 127.0.0.1: ``label`` is its button's text, changed between runs to heal."""

    url: str = ""
    label: str = "Sign in"


@contextlib.asynccontextmanager
async def login_site() -> AsyncIterator[LoginSite]:
    site = LoginSite()

    async def page(request: web.Request) -> web.Response:
        text = LOGIN_PAGE.format(label=html.escape(site.label))
        return web.Response(text=text, content_type="text/html")

    async def login(request: web.Request) -> web.Response:
        form = await request.post()
        ok = form.get("user") == USERNAME and form.get("pw") == PASSWORD
        return web.Response(text=f"Welcome {USERNAME}" if ok else "Wrong user or password")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_post("/login", login)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    site.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield site
    finally:
        await runner.cleanup()


async def shop_credential(services: Services) -> str:
    """The credential the login form takes; its id."""
    credential = await services.credentials.create(
        CredentialInput(name="shop", username=USERNAME, secret=PASSWORD)
    )
    return str(credential.id)


GOTO = "await page.goto(helpers.getEnvUrl())"
FILL = (
    "await page.get_by_label('User').fill(helpers.credentials['shop'].username)\n"
    "await page.get_by_label('Password').fill(helpers.credentials['shop'].secret)"
)
WRONG_CLICK = "await page.get_by_role('button', name='Log on').click(timeout=1000)"
CLICK = "await page.get_by_role('button', name='Sign in').click()"
EXPECT = "await expect(page.get_by_role('status')).to_have_text('Welcome ada')\nlog('signed in')"
