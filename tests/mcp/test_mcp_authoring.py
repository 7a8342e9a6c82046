"""Agent authoring through MCP, with the official client over HTTP against the real app and Chromium."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator

import pytest
from authoring_support import (
    CLICK,
    EXPECT,
    FILL,
    GOTO,
    PASSWORD,
    WRONG_CLICK,
    LoginSite,
    login_site,
    shop_credential,
)
from mcp_support import Served, Transcript, call, connect, fail, text_of
from mcp_types import ImageContent

from scenariokit.formats.inputs import LinkInput
from scenariokit.runner.parent.scheduler import Scheduler

pytestmark = pytest.mark.browser


@pytest.fixture
async def site() -> AsyncIterator[LoginSite]:
    async with login_site() as served:
        yield served


@pytest.mark.platform
async def test_an_agent_session_is_saved_as_a_scenario_of_the_code_that_ran_and_it_passes(
    server: Served, scheduler: Scheduler, site: LoginSite
) -> None:
    transcript = Transcript()
    credential_id = await shop_credential(server.services)
    async with connect(server.mcp_url) as mcp:
        environment = await transcript.call(mcp, "create_environment", name="shop", data={"url": site.url})
        started = await transcript.call(
            mcp,
            "authoring_start",
            environmentId=environment["id"],
            credentials=[{"credentialId": credential_id, "alias": "shop"}],
        )
        session = started["authoringId"]
        assert started["replayed"] == [] and started["url"] == "about:blank"

        opened = await transcript.call(mcp, "authoring_exec", authoringId=session, code=GOTO, title="Open")
        assert opened["ok"] and opened["index"] == 1 and opened["error"] is None
        assert opened["title"] == "Shop login" and opened["url"].startswith(site.url)
        assert 'button "Sign in"' in opened["snapshot"]
        filled = await transcript.call(mcp, "authoring_exec", authoringId=session, code=FILL)
        assert filled["ok"], filled["error"]
        wrong = await transcript.call(mcp, "authoring_exec", authoringId=session, code=WRONG_CLICK)
        told = {key: wrong.get(key) for key in ("ok", "live", "error", "logs")}
        assert (wrong["ok"], wrong["live"], wrong["error"]["kind"]) == (False, True, "error"), told
        assert "Log on" in wrong["error"]["message"] and "(line 1)" in wrong["error"]["message"], told
        clicked = await transcript.call(mcp, "authoring_exec", authoringId=session, code=CLICK)
        assert clicked["ok"], clicked["error"]
        result = await mcp.call_tool(
            "authoring_exec", {"authoringId": session, "code": EXPECT, "screenshot": True}
        )
        assert not result.is_error, text_of(result)
        checked = result.structured_content
        arguments = {"authoringId": session, "code": EXPECT, "screenshot": True}
        transcript.calls.append(
            {"tool": "authoring_exec", "arguments": arguments, "structuredContent": checked}
        )
        assert checked["ok"] and [line["message"] for line in checked["logs"]] == ["signed in"]
        images = [block for block in result.content if isinstance(block, ImageContent)]
        assert len(images) == 1 and base64.b64decode(images[0].data).startswith(b"\x89PNG")
        every = str([opened, filled, wrong, clicked, checked])
        assert PASSWORD not in every

        scenario = await transcript.call(mcp, "authoring_save", authoringId=session, name="Sign in")
        assert [step["execCode"] for step in scenario["steps"]] == [GOTO, FILL, CLICK, EXPECT]
        assert [step["title"] for step in scenario["steps"]] == ["Open", None, None, None]
        assert scenario["credentials"] == [{"credentialId": credential_id, "alias": "shop"}]
        assert scenario["environmentId"] == environment["id"]
        await transcript.call(mcp, "authoring_end", authoringId=session)

        run = await transcript.call(
            mcp, "run_scenario", scenarioId=scenario["id"], environmentId=environment["id"], wait=True
        )
        assert run["status"] == "pass", run["error"]
        assert [r["status"] for r in run["stepResults"]] == ["pass"] * 4
        ended = await fail(mcp, "authoring_exec", authoringId=session, code="pass")
        assert ended.structured_content["status"] == 404
        assert "has ended: ended by request" in text_of(ended)
    transcript.save()


async def test_a_scenario_failing_at_a_renamed_button_is_healed_and_then_passes(
    server: Served, scheduler: Scheduler, site: LoginSite
) -> None:
    credential_id = await shop_credential(server.services)
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="shop", data={"url": site.url})
        scenario = await call(
            mcp,
            "create_scenario",
            name="Sign in",
            environmentId=environment["id"],
            steps=[{"execCode": code} for code in (GOTO, FILL, CLICK, EXPECT)],
        )
        await server.services.scenarios.link_credential(
            uuid.UUID(scenario["id"]), LinkInput(credential_id=uuid.UUID(credential_id), alias="shop")
        )
        passed = await call(
            mcp, "run_scenario", scenarioId=scenario["id"], environmentId=environment["id"], wait=True
        )
        assert passed["status"] == "pass", passed["error"]

        site.label = "Log in"  # the site renames its button: step 3 fails from now on
        failed = await call(
            mcp, "run_scenario", scenarioId=scenario["id"], environmentId=environment["id"], wait=True
        )
        assert failed["status"] == "fail" and failed["error"]["stepId"] == scenario["steps"][2]["id"]
        failing = next(r["order"] for r in failed["stepResults"] if r["status"] == "fail")

        started = await call(
            mcp,
            "authoring_start",
            environmentId=environment["id"],
            scenarioId=scenario["id"],
            upToStep=failing - 1,
        )
        assert [r["status"] for r in started["replayed"]] == ["pass", "pass"]
        assert 'button "Log in"' in started["snapshot"]
        session = started["authoringId"]
        fixed = "await page.get_by_role('button', name='Log in').click()"
        assert (await call(mcp, "authoring_exec", authoringId=session, code=fixed))["ok"]
        assert (await call(mcp, "authoring_exec", authoringId=session, code=EXPECT))["ok"]
        healed = await call(
            mcp,
            "authoring_save",
            authoringId=session,
            scenarioId=scenario["id"],
            message="the button says Log in",
        )
        assert [s["execCode"] for s in healed["steps"]] == [GOTO, FILL, fixed, EXPECT]
        assert healed["revision"] == 3  # created, linked, healed
        newest = (await call(mcp, "list_revisions", scenarioId=scenario["id"]))["items"][0]
        assert (newest["number"], newest["source"], newest["message"]) == (
            3,
            "authoring",
            "the button says Log in",
        )
        assert failed["scenarioRevision"] == 2
        what = await call(mcp, "diff_revisions", scenarioId=scenario["id"], **{"from": 2, "to": 3})
        added = [c for c in what["steps"] if c["change"] == "added"]
        assert [c["order"] for c in added] == [3, 4] and fixed in added[0]["diff"]  # saved as new steps
        assert [s["id"] for s in healed["steps"][:2]] == [s["id"] for s in scenario["steps"][:2]]
        await call(mcp, "authoring_end", authoringId=session)

        again = await call(
            mcp, "run_scenario", scenarioId=scenario["id"], environmentId=environment["id"], wait=True
        )
        assert again["status"] == "pass", again["error"]


async def test_an_exec_that_drops_a_coroutine_fails_and_a_save_warns_of_one_that_never_ran(
    server: Served, scheduler: Scheduler, site: LoginSite
) -> None:
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="shop", data={"url": site.url})
        session = (await call(mcp, "authoring_start", environmentId=environment["id"]))["authoringId"]

        dropped = await call(
            mcp, "authoring_exec", authoringId=session, code="page.goto(helpers.getEnvUrl())"
        )
        assert (dropped["ok"], dropped["live"], dropped["error"]) == (
            False,
            True,
            {
                "kind": "error",
                "message": "line 1: page.goto(helpers.getEnvUrl()) was never awaited; add await",
            },
        )
        assert dropped["url"] == "about:blank"  # the call never ran
        opened = await call(mcp, "authoring_exec", authoringId=session, code=GOTO)
        assert opened["ok"], opened["error"]
        unreached = "if page.url == 'nowhere':\n    page.reload()"
        kept = await call(mcp, "authoring_exec", authoringId=session, code=unreached)
        assert kept["ok"], kept["error"]

        scenario = await call(mcp, "authoring_save", authoringId=session, name="Open")
        await call(mcp, "authoring_end", authoringId=session)

        assert [step["execCode"] for step in scenario["steps"]] == [GOTO, unreached]
        assert [(w["order"], w["line"], w["message"]) for w in scenario["warnings"]] == [
            (2, 2, "line 2: page.reload() is not awaited; add await")
        ]

        careless = await call(
            mcp,
            "create_scenario",
            name="Careless",
            retries={"count": 1, "backoff": "fixed", "backoffSeconds": 0},
            steps=[{"execCode": GOTO}, {"execCode": "expect(page).to_have_title('Nope')"}],
        )
        run = await call(
            mcp, "run_scenario", scenarioId=careless["id"], environmentId=environment["id"], wait=True
        )

    message = "line 1: expect(page).to_have_title('Nope') was never awaited; add await"
    assert (run["status"], run["error"]["kind"], run["error"]["message"]) == ("fail", "error", message)
    assert [(a["status"], a["error"]["message"]) for a in run["attempts"]] == [("fail", message)] * 2
