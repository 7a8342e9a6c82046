"""Browser settings of environments and scenarios through REST (docs/browser.md), and GET /devices.

Applying them to a real browser is tests/integration/test_browser_settings_runs.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from api_support import API, Client, both_backends, created, problem_of

from scenariokit.domain.job import RunFinished
from scenariokit.domain.model import utcnow

MOBILE = {
    "device": "iPhone 13",
    "locale": "de-DE",
    "timezoneId": "Europe/Berlin",
    "colorScheme": "dark",
    "geolocation": {"latitude": 52.52, "longitude": 13.405, "accuracy": 20},
    "permissions": ["geolocation"],
    "extraHTTPHeaders": {"X-Check": "yes"},
    "ignoreHTTPSErrors": True,
    "userAgent": "scenariokit-check",
    "offline": False,
    "video": "retain-on-failure",
    "blockUrls": ["**/tracker.js"],
    "viewport": {"width": 390, "height": 700},
}


async def _credential(client: Client, secret: str = "s3cret-Value") -> dict[str, Any]:
    return await created(
        client, f"{API}/credentials", {"name": "staging", "username": "stage", "secret": secret}
    )


@both_backends
async def test_settings_are_stored_read_and_patched_on_environments_and_scenarios(client: Client) -> None:
    environment = await created(
        client, f"{API}/environments", {"name": "mobile", "data": {"url": "http://x"}, "browser": MOBILE}
    )
    assert environment["browser"] == MOBILE
    read = await (await client.get(f"{API}/environments/{environment['id']}")).json()
    assert read["browser"] == MOBILE
    renamed = await client.patch(f"{API}/environments/{environment['id']}", json={"name": "phone"})
    assert (await renamed.json())["browser"] == MOBILE  # a PATCH that does not name it keeps it
    patched = await client.patch(
        f"{API}/environments/{environment['id']}", json={"browser": {"locale": "fr-FR"}}
    )
    assert (await patched.json())["browser"] == {"locale": "fr-FR"}  # given: replaced whole

    plain = await created(client, f"{API}/scenarios", {"name": "plain"})
    assert plain["browser"] == {}  # nothing set: Playwright's default desktop context
    credential = await _credential(client)
    scenario = await created(
        client,
        f"{API}/scenarios",
        {
            "name": "staging",
            "credentials": [{"credentialId": credential["id"], "alias": "stage"}],
            "browser": {"httpCredentials": {"credential": "stage"}, "device": None},
        },
    )
    assert scenario["browser"] == {"httpCredentials": {"credential": "stage"}}
    listed = await (await client.get(f"{API}/scenarios", params={"q": "staging"})).json()
    assert listed["items"][0]["browser"] == {"httpCredentials": {"credential": "stage"}}
    put = await client.put(f"{API}/scenarios/{scenario['id']}", json={"name": "staging"})
    assert (await put.json())["browser"] == {}  # PUT is the full new state


BAD_SETTINGS: list[tuple[Any, str, str]] = [
    ({"device": "Nokia 3310"}, "browser.device", "not a device Playwright knows"),
    ({"device": "iphone 13"}, "browser.device", "did you mean"),
    ({"screen": {"width": 1}}, "browser.screen", "unknown field"),
    ({"colorScheme": "sepia"}, "browser.colorScheme", "light, dark"),
    ({"video": "sometimes"}, "browser.video", "off, on, retain-on-failure"),
    ({"viewport": {"width": 0, "height": 600}}, "browser.viewport.width", "from 1 to 10000"),
    ({"viewport": {"width": 800, "height": 10001}}, "browser.viewport.height", "from 1 to 10000"),
    ({"viewport": {"width": 800}}, "browser.viewport.height", "required"),
    ({"geolocation": {"latitude": 91, "longitude": 0}}, "browser.geolocation.latitude", "-90 to 90"),
    ({"geolocation": {"latitude": 0, "longitude": -181}}, "browser.geolocation.longitude", "-180 to 180"),
    (
        {"geolocation": {"latitude": 0, "longitude": 0, "accuracy": -1}},
        "browser.geolocation.accuracy",
        "from 0",
    ),
    ({"locale": "German please"}, "browser.locale", "locale"),
    ({"timezoneId": "Mars/Olympus"}, "browser.timezoneId", "IANA time zone"),
    ({"permissions": ["telepathy"]}, "browser.permissions[0]", "not a permission"),
    ({"extraHTTPHeaders": {"Bad Header": "x"}}, "browser.extraHTTPHeaders.Bad Header", "header name"),
    ({"extraHTTPHeaders": {"X-A": "line\r\nX-B: injected"}}, "browser.extraHTTPHeaders.X-A", "one line"),
    ({"blockUrls": [""]}, "browser.blockUrls[0]", "glob"),
    ({"offline": "yes"}, "browser.offline", "true or false"),
    ({"httpCredentials": {"credential": "nobody"}}, "browser.httpCredentials.credential", "not the alias"),
    ("mobile", "browser", "JSON object"),
]


@both_backends
@pytest.mark.parametrize(("browser", "field", "words"), BAD_SETTINGS)
async def test_bad_settings_are_refused_by_field_and_nothing_is_stored(
    client: Client, browser: Any, field: str, words: str
) -> None:
    refused = await problem_of(
        await client.post(f"{API}/scenarios", json={"name": "x", "browser": browser}), 400
    )
    assert field in refused["errors"] and words in refused["errors"][field], refused
    assert (await (await client.get(f"{API}/scenarios")).json())["total"] == 0
    if field != "browser.httpCredentials.credential":  # an environment links no credentials
        answer = await client.post(f"{API}/environments", json={"name": "x", "browser": browser})
        assert field in (await problem_of(answer, 400))["errors"]
        assert (await (await client.get(f"{API}/environments")).json())["total"] == 0

    kept = await created(client, f"{API}/scenarios", {"name": "kept", "browser": {"locale": "en-GB"}})
    for method in (client.patch, client.put):
        answer = await method(f"{API}/scenarios/{kept['id']}", json={"name": "changed", "browser": browser})
        assert field in (await problem_of(answer, 400))["errors"]
    read = await (await client.get(f"{API}/scenarios/{kept['id']}")).json()
    assert (read["name"], read["browser"]) == ("kept", {"locale": "en-GB"})


async def test_the_device_list_is_playwrights(client: Client) -> None:
    answer = await client.get(f"{API}/devices")
    assert answer.status == 200
    devices = await answer.json()
    assert {"iPhone 13", "Pixel 7", "Desktop Chrome"} <= set(devices["items"])
    assert devices["items"] == sorted(devices["items"]) and devices["total"] == len(devices["items"])


@both_backends
async def test_a_run_records_the_environments_settings_overlaid_by_the_scenarios(client: Client) -> None:
    secret = "tok-Very-Secret-123"
    credential = await _credential(client, secret)
    environment = await created(
        client,
        f"{API}/environments",
        {
            "name": "e",
            "data": {"url": "http://x"},
            "browser": {
                "device": "iPhone 13",
                "locale": "en-GB",
                "extraHTTPHeaders": {"Authorization": f"Bearer {secret}"},
            },
        },
    )
    scenario = await created(
        client,
        f"{API}/scenarios",
        {
            "name": "s",
            "credentials": [{"credentialId": credential["id"], "alias": "api"}],
            "browser": {"locale": "de-DE", "colorScheme": "dark"},
        },
    )
    run = await created(
        client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    )
    expected = {
        "device": "iPhone 13",
        "locale": "de-DE",
        "colorScheme": "dark",
        "extraHTTPHeaders": {"Authorization": "Bearer ***"},  # a linked secret is masked
    }
    assert run["browser"] == expected
    detail = await (await client.get(f"{API}/run/{run['id']}")).json()
    assert detail["browser"] == expected
    # the environment itself holds what it was given (docs/browser.md: keep secrets in credentials)
    assert detail["environment"]["browser"]["extraHTTPHeaders"] == {"Authorization": f"Bearer {secret}"}
    listed = await (await client.get(f"{API}/run", params={"scenarioId": scenario["id"]})).json()
    assert listed["items"][0]["browser"] == expected


@both_backends
async def test_an_environment_naming_a_credential_the_scenario_lacks_refuses_the_run(client: Client) -> None:
    environment = await created(
        client,
        f"{API}/environments",
        {
            "name": "staging",
            "data": {"url": "http://x"},
            "browser": {"httpCredentials": {"credential": "stage"}},
        },
    )
    scenario = await created(client, f"{API}/scenarios", {"name": "s"})
    body = {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    refused = await problem_of(await client.post(f"{API}/run", json=body), 400)
    assert "not the alias of a credential linked" in refused["errors"]["browser.httpCredentials.credential"]
    batch = {"scenarioId": scenario["id"], "environmentIds": [environment["id"]]}
    assert (
        "browser.httpCredentials.credential"
        in (await problem_of(await client.post(f"{API}/run", json=batch), 400))["errors"]
    )
    assert (await (await client.get(f"{API}/run")).json())["total"] == 0


async def test_a_credential_answering_http_authentication_cannot_be_unlinked(client: Client) -> None:
    credential = await _credential(client)
    scenario = await created(
        client,
        f"{API}/scenarios",
        {
            "name": "s",
            "credentials": [{"credentialId": credential["id"], "alias": "stage"}],
            "browser": {"httpCredentials": {"credential": "stage"}},
        },
    )
    answer = await client.delete(f"{API}/scenarios/{scenario['id']}/credentials/{credential['id']}")
    assert "browser.httpCredentials" in (await problem_of(answer, 409))["detail"]
    read = await (await client.get(f"{API}/scenarios/{scenario['id']}")).json()
    assert read["credentials"] == [{"credentialId": credential["id"], "alias": "stage"}]
    # dropping the link with the settings in one write is fine
    patched = await client.patch(f"{API}/scenarios/{scenario['id']}", json={"credentials": [], "browser": {}})
    assert patched.status == 200, await patched.text()


async def test_a_runs_video_is_listed_served_and_shown_in_its_report(
    client: Client, services: Any, artifacts_dir: Path
) -> None:
    environment = await created(client, f"{API}/environments", {"name": "e", "data": {"url": "http://x"}})
    browser = {"video": "on", "device": "Pixel 7", "extraHTTPHeaders": {"X-Token": "t0k"}}
    scenario = await created(client, f"{API}/scenarios", {"name": "s", "browser": browser})
    run = await created(
        client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    )
    video = b"\x1a\x45\xdf\xa3" + b"\x00" * 64  # what the worker saved: the page's WebM
    (artifacts_dir / run["id"]).mkdir(parents=True)
    (artifacts_dir / run["id"] / "video.webm").write_bytes(video)
    now = utcnow()
    outcome = RunFinished(status="pass", error=None, step_results=(), started_at=now, finished_at=now)
    await services.runs.finish(uuid.UUID(run["id"]), outcome, artifacts=["video.webm"])

    detail = await (await client.get(f"{API}/run/{run['id']}")).json()
    url = f"{API}/run/{run['id']}/artifacts/video.webm"
    assert detail["artifacts"] == [{"name": "video.webm", "url": url, "contentType": "video/webm"}]
    served = await client.get(url)
    assert served.content_type == "video/webm" and await served.read() == video
    page = await client.get(f"/report/runs/{run['id']}")
    html = await page.text()
    assert f'<video class="video" controls preload="metadata" src="{url}"' in html
    assert "media-src 'self'" in page.headers["Content-Security-Policy"]
    summary = 'id="browser-settings">device Pixel 7 · extraHTTPHeaders X-Token · video on</dd>'
    assert summary in html and "t0k" not in html  # header names only
