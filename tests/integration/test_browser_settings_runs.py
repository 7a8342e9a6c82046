"""Browser settings applied for real: each one shown by a local page to a run in real Chromium.

Three runs cover every setting (CI time is limited): a mobile device with locale, time zone, colour
scheme, geolocation, headers and a blocked script (video kept only on failure: none); a staging site
over HTTPS with a self-signed certificate behind basic auth, answered by a linked credential (video
asked for explicitly: kept); an offline browser whose failed run keeps its video. An authoring
session opens with the same settings a run gets.
"""

from __future__ import annotations

import base64
import datetime
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import pytest_asyncio
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import scenariokit
from scenariokit.domain.browser import devices
from scenariokit.domain.model import RunStatus
from scenariokit.formats.presenters import run_json

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

USERNAME = "stage"
PASSWORD = "pa55-Staging-Secret"
#: the first bytes of every WebM (EBML) file
WEBM_MAGIC = b"\x1a\x45\xdf\xa3"

HOME = """<!doctype html><meta name="viewport" content="width=device-width"><title>Store finder</title>
<h1>Find a store</h1>
<script src="/tracker.js"></script>
<script src="/app.js"></script>"""


@attrs.define
class SettingsSite:
    """Pages on 127.0.0.1 over HTTP and HTTPS (a self-signed certificate), noting what reached it."""

    url: str = ""
    secure_url: str = ""
    hits: dict[str, int] = attrs.field(factory=dict)
    headers: dict[str, dict[str, str]] = attrs.field(factory=dict)

    async def handle(self, request: web.Request) -> web.Response:
        self.hits[request.path] = self.hits.get(request.path, 0) + 1
        self.headers[request.path] = dict(request.headers)
        if request.path == "/":
            return web.Response(text=HOME, content_type="text/html")
        if request.path in ("/app.js", "/tracker.js"):
            return web.Response(
                text="window.loaded = (window.loaded || 0) + 1;", content_type="text/javascript"
            )
        if request.path == "/staging":
            expected = "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
            if request.headers.get("Authorization") != expected:
                return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="staging"'})
            return web.Response(text="<h1>Welcome to staging</h1>", content_type="text/html")
        raise web.HTTPNotFound()


def self_signed(folder: Path) -> ssl.SSLContext:
    """A server TLS context with a certificate for 127.0.0.1 that nobody signed but itself."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return context


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SettingsSite]:
    served = SettingsSite()
    app = web.Application()
    app.router.add_get("/{tail:.*}", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    plain = web.TCPSite(runner, "127.0.0.1", 0)
    secure = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self_signed(tmp_path_factory.mktemp("tls")))
    await plain.start()
    await secure.start()
    served.url = f"http://127.0.0.1:{plain._server.sockets[0].getsockname()[1]}/"  # type: ignore[union-attr]
    served.secure_url = f"https://127.0.0.1:{secure._server.sockets[0].getsockname()[1]}/"  # type: ignore[union-attr]
    yield served
    await runner.cleanup()


def artifact(kit: scenariokit.Kit, run_id: uuid.UUID, name: str) -> Path:
    return kit.services.runs.artifacts_dir(run_id) / name


async def test_a_mobile_german_dark_geolocated_run_sees_every_setting(
    kit: scenariokit.Kit, site: SettingsSite
) -> None:
    pixel = devices()["Pixel 7"]
    viewport = pixel["viewport"]
    agent = pixel.get("userAgent") or pixel["user_agent"]
    environment = await kit.environments.create(
        {
            "name": "stores",
            "data": {"url": site.url},
            # the environment's device and locale lose to the scenario's; its headers stay
            "browser": {
                "device": "iPhone 13",
                "locale": "en-GB",
                "extraHTTPHeaders": {"X-Check": "from-env"},
            },
        }
    )
    code = f"""await page.goto(helpers.getEnvUrl())
facts = await page.evaluate('''() => ({{
  width: innerWidth, agent: navigator.userAgent, touch: navigator.maxTouchPoints,
  language: navigator.language, zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  dark: matchMedia("(prefers-color-scheme: dark)").matches, loaded: window.loaded}})''')
print(facts)
assert facts["width"] == {viewport["width"]}, facts
assert facts["agent"] == {agent!r}, facts
assert facts["touch"] > 0, facts
assert facts["language"] == "de-DE", facts
assert facts["zone"] == "Europe/Berlin", facts
assert facts["dark"] is True, facts
assert facts["loaded"] == 1, facts  # app.js ran; tracker.js never arrived
where = await page.evaluate('''() => new Promise((ok, no) => navigator.geolocation.getCurrentPosition(
  p => ok([p.coords.latitude, p.coords.longitude]), e => no(new Error(e.message))))''')
assert where == [52.52, 13.405], where
"""
    scenario = await kit.scenarios.create(
        {
            "name": "mobile store finder",
            "steps": [{"execCode": code}],
            "browser": {
                "device": "Pixel 7",
                "locale": "de-DE",
                "timezoneId": "Europe/Berlin",
                "colorScheme": "dark",
                "geolocation": {"latitude": 52.52, "longitude": 13.405},
                "permissions": ["geolocation"],
                "blockUrls": ["**/tracker.js"],
                "video": "retain-on-failure",
            },
        }
    )
    result = await kit.run(scenario.id, environment_id=environment.id, timeout=120)
    assert result.run.status is RunStatus.PASS, (result.run.error, [e.message for e in result.logs.items])
    assert site.headers["/"]["X-Check"] == "from-env"
    assert site.hits.get("/tracker.js") is None and site.hits["/app.js"] >= 1
    recorded = run_json(kit.services.converter, result.run)["browser"]
    assert recorded["device"] == "Pixel 7" and recorded["locale"] == "de-DE"
    assert recorded["extraHTTPHeaders"] == {"X-Check": "from-env"}
    # retain-on-failure and a pass: no video kept, nothing left of the recording
    assert not [name for name in result.run.artifacts if name.endswith(".webm")]
    assert not artifact(kit, result.run.id, ".video").exists()


async def test_a_staging_site_behind_basic_auth_and_a_self_signed_certificate_passes(
    kit: scenariokit.Kit, site: SettingsSite
) -> None:
    credential = await kit.credentials.create({"name": "staging", "username": USERNAME, "secret": PASSWORD})
    environment = await kit.environments.create(
        {
            "name": "staging",
            "data": {"url": site.secure_url + "staging"},
            "browser": {"ignoreHTTPSErrors": True, "httpCredentials": {"credential": "staging"}},
        }
    )
    scenario = await kit.scenarios.create(
        {
            "name": "staging home",
            "credentials": [{"credentialId": str(credential.id), "alias": "staging"}],
            # a run with linked credentials records a video only when asked explicitly: "on"
            "browser": {"video": "on"},
            "steps": [
                {
                    "execCode": "await page.goto(helpers.getEnvUrl())\n"
                    "await expect(page.get_by_role('heading')).to_have_text('Welcome to staging')\n"
                    "print('secret is', helpers.credentials['staging'].secret)"
                }
            ],
        }
    )
    result = await kit.run(scenario.id, environment_id=environment.id, timeout=120)
    assert result.run.status is RunStatus.PASS, (result.run.error, [e.message for e in result.logs.items])
    detail = run_json(kit.services.converter, result.run)
    assert detail["browser"] == {
        "httpCredentials": {"credential": "staging"},
        "ignoreHTTPSErrors": True,
        "video": "on",
    }
    texts = [line.message for line in result.logs.items]
    assert "secret is ***" in texts
    assert PASSWORD not in repr(detail) and not any(PASSWORD in text for text in texts)
    assert "video.webm" in result.run.artifacts
    assert artifact(kit, result.run.id, "video.webm").read_bytes()[:4] == WEBM_MAGIC


async def test_an_offline_run_that_fails_keeps_its_video(kit: scenariokit.Kit, site: SettingsSite) -> None:
    environment = await kit.environments.create({"name": "offline", "data": {"url": site.url + "offline"}})
    scenario = await kit.scenarios.create(
        {
            "name": "offline",
            "browser": {"offline": True, "video": "retain-on-failure"},
            "steps": [
                {"execCode": "assert await page.evaluate('navigator.onLine') is False"},
                {"execCode": "await page.goto(helpers.getEnvUrl())"},
            ],
        }
    )
    result = await kit.run(scenario.id, environment_id=environment.id, timeout=120)
    assert result.run.status is RunStatus.FAIL
    assert [r.status.value for r in result.run.step_results] == ["pass", "fail"]
    assert result.run.error is not None and "ERR_INTERNET_DISCONNECTED" in result.run.error.message
    assert site.hits.get("/offline") is None
    assert "video.webm" in result.run.artifacts
    assert artifact(kit, result.run.id, "video.webm").read_bytes()[:4] == WEBM_MAGIC


async def test_an_authoring_session_opens_with_the_settings_a_run_gets(
    kit: scenariokit.Kit, site: SettingsSite
) -> None:
    await kit.start_runner()
    environment = await kit.environments.create(
        {
            "name": "authoring",
            "data": {"url": site.url},
            "browser": {"locale": "fr-FR", "timezoneId": "Asia/Tokyo"},
        }
    )
    scenario = await kit.scenarios.create(
        {"name": "authoring settings", "browser": {"viewport": {"width": 500, "height": 600}}}
    )
    started = await kit.authoring.start(
        {"environmentId": str(environment.id), "scenarioId": str(scenario.id)}
    )
    try:
        code = (
            "facts = await page.evaluate('() => [innerWidth, navigator.language, "
            "Intl.DateTimeFormat().resolvedOptions().timeZone]')\n"
            "assert facts == [500, 'fr-FR', 'Asia/Tokyo'], facts"
        )
        outcome: Any = await kit.authoring.exec(started.authoring_id, {"code": code})
        assert outcome.ok, outcome
    finally:
        await kit.authoring.end(started.authoring_id)
