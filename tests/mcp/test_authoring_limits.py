"""Authoring limits and refusals, over REST and MCP: the cap, idle close, exec time limits, crashes,
masking, and bad input named by field."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from authoring_support import PASSWORD, LoginSite, login_site, shop_credential
from mcp_support import API, Served, ServerFactory, call, connect, fail, text_of

from scenariokit.bootstrap import running_scheduler
from scenariokit.domain.authoring import MAX_EXEC_CODE_CHARS

IDLE_SECONDS = 3.0
LEAK = (
    "import json, base64\ns = helpers.credentials['shop'].secret\n"
    "print('plain', s)\nlog('json ' + json.dumps(s))\nprint('b64', base64.b64encode(s.encode()).decode())\n"
    "await page.set_content(f'<title>{s}</title><h1>{s}</h1>')\n"
    "raise ValueError('bad ' + s)"
)


@pytest.fixture
async def site() -> AsyncIterator[LoginSite]:
    async with login_site() as served:
        yield served


@pytest.fixture
async def capped(start_server: ServerFactory) -> AsyncIterator[Served]:
    """The app holding at most one authoring session, closed after a few idle seconds."""
    served = await start_server(authoring_max=1, authoring_idle_seconds=IDLE_SECONDS)
    async with running_scheduler(served.services, workers=1):
        yield served


def forms(secret: str) -> list[str]:
    import base64
    import json

    return [secret, json.dumps(secret)[1:-1], base64.b64encode(secret.encode()).decode()]


class Rest:
    """JSON calls to the app's REST routes."""

    def __init__(self, http: aiohttp.ClientSession, base: str) -> None:
        self.http, self.base = http, base

    async def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        async with self.http.request(method, self.base + API + path, json=body) as response:
            data = await response.json(content_type=None) if response.status != 204 else None
            return response.status, data


@pytest.mark.browser
async def test_rest_limits_cap_idle_timeouts_crashes_and_masking(capped: Served, site: LoginSite) -> None:
    credential_id = await shop_credential(capped.services)
    async with aiohttp.ClientSession() as http:
        rest = Rest(http, capped.url)
        status, env = await rest("POST", "/environments", {"name": "shop", "data": {"url": site.url}})
        start = {
            "environmentId": env["id"],
            "credentials": [{"credentialId": credential_id, "alias": "shop"}],
        }
        status, started = await rest("POST", "/authoring", start)
        assert status == 201, started
        session = f"/authoring/{started['authoringId']}"
        status, refused = await rest("POST", "/authoring", start)
        assert status == 409 and "SCENARIOKIT_AUTHORING_MAX=1" in refused["detail"]

        # an exec over its limit is stopped; the session goes on
        status, slow = await rest(
            "POST",
            f"{session}/exec",
            {"code": "import asyncio\nawait asyncio.sleep(10)", "timeoutSeconds": 0.5},
        )
        assert status == 200 and (slow["ok"], slow["live"]) == (False, True)
        assert slow["error"] == {"kind": "timeout", "message": "exec 1 exceeded its time limit of 0.5 s"}
        status, after = await rest("POST", f"{session}/exec", {"code": "log('still here')"})
        assert after["ok"] and [line["message"] for line in after["logs"]] == ["still here"]

        # secrets are masked in every part of an answer
        status, leaked = await rest("POST", f"{session}/exec", {"code": LEAK})
        text = str(leaked)
        for form in forms(PASSWORD):
            assert form not in text, form
        assert leaked["error"]["message"] == "ValueError: bad *** (line 7)"
        assert leaked["title"] == "***" and 'heading "***"' in leaked["snapshot"]
        assert {"plain ***", 'json "***"', "b64 ***"} <= {line["message"] for line in leaked["logs"]}
        status, look = await rest("GET", f"{session}?screenshot=true")
        assert status == 200 and look["title"] == "***" and look["screenshot"]

        # keep names execs that passed; a bad index is refused by field
        status, bad = await rest("POST", f"{session}/save", {"name": "x", "keep": [1, 9]})
        assert status == 400 and set(bad["errors"]) == {"keep[0]", "keep[1]"}
        status, saved = await rest("POST", f"{session}/save", {"name": "kept", "keep": [2]})
        assert status == 201 and [s["execCode"] for s in saved["steps"]] == ["log('still here')"]

        # step code that kills its worker ends the session, and says so
        status, crashed = await rest("POST", f"{session}/exec", {"code": "import os\nos._exit(3)"})
        assert (crashed["ok"], crashed["live"], crashed["error"]["kind"]) == (False, False, "error")
        assert "exited with code 3" in crashed["error"]["message"]
        status, gone = await rest("GET", session)
        assert status == 404 and "has ended" in gone["detail"]

        # the cap is free again; code that never yields is killed at its limit and ends the session
        status, second = await rest("POST", "/authoring", start)
        assert status == 201, second
        spin = {"code": "while True:\n    pass", "timeoutSeconds": 1}
        status, spun = await rest("POST", f"/authoring/{second['authoringId']}/exec", spin)
        assert (spun["ok"], spun["live"], spun["error"]["kind"]) == (False, False, "timeout")
        assert "did not yield" in spun["error"]["message"]

        # an unused session closes once idle
        status, third = await rest("POST", "/authoring", start)
        assert status == 201
        await asyncio.sleep(IDLE_SECONDS * 2)
        status, idle = await rest("GET", f"/authoring/{third['authoringId']}")
        assert status == 404 and "idle for more than 3 s" in idle["detail"]
        status, _ = await rest("DELETE", f"/authoring/{third['authoringId']}")
        assert status == 404


@pytest.mark.browser
async def test_mcp_limits_cap_timeouts_crashes_and_masking(capped: Served, site: LoginSite) -> None:
    credential_id = await shop_credential(capped.services)
    async with connect(capped.mcp_url) as mcp:
        env = await call(mcp, "create_environment", name="shop", data={"url": site.url})
        start = {
            "environmentId": env["id"],
            "credentials": [{"credentialId": credential_id, "alias": "shop"}],
        }
        session = (await call(mcp, "authoring_start", **start))["authoringId"]
        refused = await fail(mcp, "authoring_start", **start)
        assert refused.structured_content["status"] == 409

        slow = await call(
            mcp, "authoring_exec", authoringId=session, code="import asyncio\nawait asyncio.sleep(10)",
            timeoutSeconds=0.5,
        )  # fmt: skip
        assert (slow["ok"], slow["live"], slow["error"]["kind"]) == (False, True, "timeout")
        leaked = await mcp.call_tool("authoring_exec", {"authoringId": session, "code": LEAK})
        text = text_of(leaked) + str(leaked.structured_content)
        for form in forms(PASSWORD):
            assert form not in text, form
        assert leaked.structured_content["error"]["message"] == "ValueError: bad *** (line 7)"
        look = await call(mcp, "authoring_snapshot", authoringId=session)
        assert look["title"] == "***"

        crashed = await call(mcp, "authoring_exec", authoringId=session, code="import os\nos._exit(3)")
        assert (crashed["ok"], crashed["live"]) == (False, False)
        gone = await fail(mcp, "authoring_snapshot", authoringId=session)
        assert gone.structured_content["status"] == 404 and "has ended" in text_of(gone)
        again = await call(mcp, "authoring_start", **start)
        assert (await call(mcp, "authoring_exec", authoringId=again["authoringId"], code="pass"))["ok"]
        await call(mcp, "authoring_end", authoringId=again["authoringId"])


async def test_bad_input_is_refused_naming_the_field(server: Served) -> None:
    missing = str(uuid.uuid4())
    async with aiohttp.ClientSession() as http:
        rest = Rest(http, server.url)
        status, env = await rest("POST", "/environments", {"name": "e", "data": {}})
        cases = [
            ("POST", "/authoring", {}, 400, "environmentId"),
            ("POST", "/authoring", {"environmentId": "nope"}, 400, "environmentId"),
            ("POST", "/authoring", {"environmentId": missing}, 400, "environmentId"),
            ("POST", "/authoring", {"environmentId": env["id"], "upToStep": -1}, 400, "upToStep"),
            ("POST", "/authoring", {"environmentId": env["id"], "upToStep": 2}, 400, "upToStep"),
            ("POST", "/authoring", {"environmentId": env["id"], "scenarioId": missing}, 400, "scenarioId"),
            ("POST", "/authoring", {"environmentId": env["id"], "bogus": 1}, 400, "bogus"),
            ("GET", "/authoring/nope", None, 400, "id"),
            ("POST", "/authoring/nope/exec", {"code": "pass"}, 400, "id"),
            ("POST", f"/authoring/{missing}/exec", {"code": "x" * (MAX_EXEC_CODE_CHARS + 1)}, 400, "code"),
            ("POST", f"/authoring/{missing}/exec", {"code": "await ("}, 400, "code"),
            (
                "POST",
                f"/authoring/{missing}/exec",
                {"code": "pass", "timeoutSeconds": 0},
                400,
                "timeoutSeconds",
            ),
            ("POST", f"/authoring/{missing}/save", {"name": ""}, 400, "name"),
            ("POST", f"/authoring/{missing}/save", {"keep": "1"}, 400, "keep"),
        ]
        for method, path, body, expected, field in cases:
            status, problem = await rest(method, path, body)
            assert status == expected and field in problem.get("errors", {}), (path, body, problem)
        # well-formed, valid, but no such session
        for method, path, body in [
            ("GET", f"/authoring/{missing}", None),
            ("POST", f"/authoring/{missing}/exec", {"code": "pass"}),
            ("POST", f"/authoring/{missing}/save", {"name": "x"}),
            ("DELETE", f"/authoring/{missing}", None),
        ]:
            status, problem = await rest(method, path, body)
            assert status == 503 and "no scheduler" in problem["detail"], problem  # this server runs none
    async with connect(server.mcp_url) as mcp:
        bad = await fail(mcp, "authoring_exec", authoringId="nope", code="pass")
        assert bad.structured_content["errors"] == {"authoringId": "'nope' is not a UUID"}
        long = await fail(mcp, "authoring_exec", authoringId=missing, code="x" * (MAX_EXEC_CODE_CHARS + 1))
        assert set(long.structured_content["errors"]) == {"code"}
        assert (await fail(mcp, "authoring_start", environmentId=missing)).structured_content["errors"] == {
            "environmentId": f"no environment with id {missing}"
        }


async def test_unknown_sessions_are_404_where_sessions_are_held(capped: Served) -> None:
    missing = str(uuid.uuid4())
    async with aiohttp.ClientSession() as http:
        rest = Rest(http, capped.url)
        for method, path, body in [
            ("GET", f"/authoring/{missing}", None),
            ("POST", f"/authoring/{missing}/exec", {"code": "pass"}),
            ("POST", f"/authoring/{missing}/save", {"name": "x"}),
            ("DELETE", f"/authoring/{missing}", None),
        ]:
            status, problem = await rest(method, path, body)
            assert status == 404 and problem["detail"] == f"authoring session {missing} not found", problem


@pytest.mark.browser
async def test_rest_sessions_start_from_saved_sessions_and_save_into_the_scenario_they_replayed(
    capped: Served, site: LoginSite
) -> None:
    goto = "await page.goto(helpers.getEnvUrl())"
    remember = "await page.evaluate(\"localStorage.setItem('token', 'tok-1234567890')\")"
    async with aiohttp.ClientSession() as http:
        rest = Rest(http, capped.url)
        _, env = await rest("POST", "/environments", {"name": "shop", "data": {"url": site.url}})
        steps = [{"execCode": goto}, {"execCode": remember}, {"execCode": "log('third')"}]
        _, scenario = await rest("POST", "/scenarios", {"name": "remember", "steps": steps})
        _, run = await rest(
            "POST", "/run", {"scenarioId": scenario["id"], "environmentId": env["id"], "saveSession": True}
        )
        for _ in range(240):
            _, run = await rest("GET", f"/run/{run['id']}")
            if run["status"] != "in_progress":
                break
            await asyncio.sleep(0.25)
        assert run["status"] == "pass" and run["sessionId"], run

        start = {
            "environmentId": env["id"],
            "scenarioId": scenario["id"],
            "upToStep": 1,
            "sessionId": run["sessionId"],
        }
        status, started = await rest("POST", "/authoring", start)
        assert status == 201 and [r["status"] for r in started["replayed"]] == ["pass"], started
        session = f"/authoring/{started['authoringId']}"
        read = "log(await page.evaluate(\"localStorage.getItem('token')\"))"
        _, token = await rest("POST", f"{session}/exec", {"code": read, "title": "token"})
        assert token["ok"] and [line["message"] for line in token["logs"]] == ["tok-1234567890"]

        status, other = await rest("POST", "/scenarios", {"name": "other"})
        status, refused = await rest("POST", f"{session}/save", {"scenarioId": other["id"]})
        assert status == 400 and set(refused["errors"]) == {"scenarioId"}
        status, both = await rest("POST", f"{session}/save", {"scenarioId": scenario["id"], "name": "x"})
        assert status == 400 and set(both["errors"]) == {"name", "scenarioId"}
        status, saved = await rest("POST", f"{session}/save", {"scenarioId": scenario["id"]})
        assert status == 200, saved
        assert [s["execCode"] for s in saved["steps"]] == [goto, read]
        assert saved["steps"][0]["id"] == scenario["steps"][0]["id"] and saved["steps"][1]["title"] == "token"

        # the replayed step changed meanwhile: saving into the scenario is refused, nothing is written
        first = saved["steps"][0]["id"]
        await rest("PATCH", f"/scenarios/{scenario['id']}/steps/{first}", {"execCode": "pass"})
        status, conflict = await rest("POST", f"{session}/save", {"scenarioId": scenario["id"]})
        assert status == 409 and "changed since the session replayed them" in conflict["detail"]
        _, kept = await rest("GET", f"/scenarios/{scenario['id']}")
        assert [s["execCode"] for s in kept["steps"]] == ["pass", read]
        assert (await rest("DELETE", session))[0] == 204


@pytest.mark.browser
async def test_a_replay_that_fails_still_hands_over_the_page_where_it_stopped(
    capped: Served, site: LoginSite
) -> None:
    async with connect(capped.mcp_url) as mcp:
        env = await call(mcp, "create_environment", name="shop", data={"url": site.url})
        failing = "await expect(page.get_by_text('Nope')).to_be_visible(timeout=500)"
        steps = [
            {"execCode": "await page.goto(helpers.getEnvUrl())"},
            {"execCode": failing},
            {"execCode": "pass"},
        ]
        scenario = await call(mcp, "create_scenario", name="broken", steps=steps)
        started = await call(mcp, "authoring_start", environmentId=env["id"], scenarioId=scenario["id"])
        assert [r["status"] for r in started["replayed"]] == ["pass", "fail", "skipped"]
        assert "Nope" in started["replayed"][1]["error"] and started["title"] == "Shop login"
        probe = await call(
            mcp, "authoring_exec", authoringId=started["authoringId"], code="log(await page.title())"
        )
        assert probe["ok"] and [line["message"] for line in probe["logs"]] == ["Shop login"]
        await call(mcp, "authoring_end", authoringId=started["authoringId"])
