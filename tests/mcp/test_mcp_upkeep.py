"""The tools an agent keeps checks with (docs/mcp.md, "Tools"): each answers what its REST route answers,
pages and filters the same way, and refuses bad input with the REST problem body, storing nothing."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from mcp_support import API, Served, ServerFactory, call, connect, fail
from mcp_types import ImageContent, ResourceLink, TextContent

from scenariokit.domain.job import RunFinished
from scenariokit.domain.json_values import MAX_DEPTH
from scenariokit.domain.model import RunError, RunErrorKind, StepResult, StepStatus
from scenariokit.formats.inputs import (
    CredentialInput,
    EnvironmentInput,
    RunInput,
    ScenarioInput,
    SnippetInput,
    StepInput,
)
from scenariokit_server.mcp_tools import MAX_IMAGE_BYTES, MAX_RUN_IMAGES

SECRET = "hunter2-very-secret"


async def _rest(server: Served, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.request(method, server.url + path, **kwargs) as response:
        body = await response.json(content_type=None) if response.status != 204 else None
        return response.status, body


async def _problem(server: Served, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
    status, body = await _rest(server, "GET", path, params=params)
    assert status >= 400, body
    assert isinstance(body, dict)
    return body


async def _queue_runs(server: Served) -> dict[str, Any]:
    """Two scenarios, two environments, three queued runs (no scheduler: they stay in_progress)."""
    async with connect(server.mcp_url) as mcp:
        first = await call(mcp, "create_scenario", name="checkout", steps=[{"execCode": "pass"}])
        second = await call(mcp, "create_scenario", name="login", steps=[{"execCode": "pass"}])
        staging = await call(mcp, "create_environment", name="staging", data={"url": "http://127.0.0.1:9"})
        live = await call(mcp, "create_environment", name="live", data={"url": "http://127.0.0.1:9"})
        runs = [
            await call(mcp, "run_scenario", scenarioId=first["id"], environmentId=staging["id"]),
            await call(mcp, "run_scenario", scenarioId=first["id"], environmentId=live["id"]),
            await call(mcp, "run_scenario", scenarioId=second["id"], environmentId=staging["id"]),
        ]
    return {"scenarios": [first, second], "environments": [staging, live], "runs": runs}


async def test_list_runs_filters_and_pages_as_rest_does(server: Served) -> None:
    made = await _queue_runs(server)
    first, _ = made["scenarios"]
    staging, live = made["environments"]
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    cases: list[dict[str, Any]] = [
        {},
        {"scenarioId": first["id"]},
        {"environmentId": staging["id"]},
        {"scenarioId": first["id"], "environmentId": live["id"]},
        {"status": "in_progress", "since": hour_ago},
        {"since": later},
        {"page": 2, "limit": 2, "orderBy": "scenario.name", "orderDir": "asc"},
    ]
    async with connect(server.mcp_url) as mcp:
        for arguments in cases:
            listed = await call(mcp, "list_runs", **arguments)
            status, rest = await _rest(
                server, "GET", f"{API}/run", params={k: str(v) for k, v in arguments.items()}
            )
            assert status == 200
            assert listed == rest, arguments
        assert (await call(mcp, "list_runs", environmentId=staging["id"]))["total"] == 2
        assert (await call(mcp, "list_runs", since=later))["total"] == 0
        assert (await call(mcp, "list_runs", status="fail"))["items"] == []


@pytest.mark.parametrize(
    ("arguments", "query"),
    [
        ({"page": 0}, {"page": "0"}),
        ({"limit": 201}, {"limit": "201"}),
        ({"page": 1_000_000_001}, {"page": "1000000001"}),
        ({"scenarioId": "not-a-uuid"}, {"scenarioId": "not-a-uuid"}),
        ({"environmentId": "1234"}, {"environmentId": "1234"}),
        ({"since": "yesterday"}, {"since": "yesterday"}),
        ({"status": "broken"}, {"status": "broken"}),
        ({"orderBy": "name"}, {"orderBy": "name"}),
    ],
)
async def test_bad_list_runs_arguments_get_the_rest_problem(
    server: Served, arguments: dict[str, Any], query: dict[str, str]
) -> None:
    async with connect(server.mcp_url) as mcp:
        refused = await fail(mcp, "list_runs", **arguments)
    assert refused.structured_content == await _problem(server, f"{API}/run", query)


async def test_cancel_run_answers_the_cancelled_run_and_a_finished_one_is_409(server: Served) -> None:
    made = await _queue_runs(server)
    run = made["runs"][0]
    async with connect(server.mcp_url) as mcp:
        cancelled = await call(mcp, "cancel_run", runId=run["id"])
        assert (cancelled["status"], cancelled["error"]["kind"]) == ("fail", "cancelled")
        assert cancelled == await call(mcp, "get_run", runId=run["id"])
        again = await fail(mcp, "cancel_run", runId=run["id"])
        status, rest = await _rest(server, "POST", f"{API}/run/{run['id']}/cancel")
        assert status == 409 and again.structured_content == rest
        refused = await fail(mcp, "cancel_run", runId="run-1")
        assert refused.structured_content["errors"] == {"runId": "'run-1' is not a UUID"}
        missing = await fail(mcp, "cancel_run", runId=str(uuid.uuid4()))
        assert missing.structured_content["status"] == 404
    listed = await server.services.runs.list()
    assert sorted(detail.run.status.value for detail in listed.items) == [
        "fail",
        "in_progress",
        "in_progress",
    ]


async def test_get_scenario_stats_answers_what_rest_answers(server: Served) -> None:
    made = await _queue_runs(server)
    first = made["scenarios"][0]
    async with connect(server.mcp_url) as mcp:
        await call(mcp, "cancel_run", runId=made["runs"][0]["id"])
        stats = await call(mcp, "get_scenario_stats", scenarioId=first["id"], days=7)
        status, rest = await _rest(
            server, "GET", f"{API}/scenarios/{first['id']}/stats", params={"days": "7"}
        )
        assert status == 200 and stats == rest
        assert (stats["runs"], stats["failed"], stats["lastFailure"]["runId"]) == (
            1,
            1,
            made["runs"][0]["id"],
        )
        refused = await fail(mcp, "get_scenario_stats", scenarioId=first["id"], days=0)
        problem = await _problem(server, f"{API}/scenarios/{first['id']}/stats", {"days": "0"})
        assert refused.structured_content == problem
        missing = await fail(mcp, "get_scenario_stats", scenarioId=str(uuid.uuid4()))
        assert missing.structured_content["status"] == 404


async def test_snippets_credentials_and_sessions_read_as_rest_reads_them(server: Served) -> None:
    services = server.services
    snippet = await services.snippets.create(
        SnippetInput(alias="login", title="Log in", code="await page.goto(args[0])")
    )
    await services.credentials.create(CredentialInput(name="shop admin", username="ada", secret=SECRET))
    async with connect(server.mcp_url) as mcp:
        for tool, path, params in (
            ("list_snippets", "/snippets", {"q": "log"}),
            ("list_credentials", "/credentials", {"orderBy": "name"}),
            ("list_sessions", "/sessions", {}),
        ):
            listed = await call(mcp, tool, **params)
            status, rest = await _rest(server, "GET", API + path, params=params)
            assert status == 200 and listed == rest, tool
        credentials = await mcp.call_tool("list_credentials", {})
        assert SECRET not in str(credentials.model_dump())
        item = credentials.structured_content["items"][0]
        assert (item["name"], item["username"], item["hasSecret"]) == ("shop admin", "ada", True)
        got = await call(mcp, "get_snippet", snippetId=str(snippet.id))
        assert got == (await _rest(server, "GET", f"{API}/snippets/{snippet.id}"))[1]
        refused = await fail(mcp, "get_snippet", snippetId="login")
        assert refused.structured_content["errors"] == {"snippetId": "'login' is not a UUID"}
        refused = await fail(mcp, "list_snippets", orderBy="code")
        assert refused.structured_content == await _problem(server, f"{API}/snippets", {"orderBy": "code"})
        refused = await fail(mcp, "list_sessions", limit=0)
        assert refused.structured_content == await _problem(server, f"{API}/sessions", {"limit": "0"})


async def test_delete_environment_deletes_once(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="old")
        gone = await call(mcp, "delete_environment", environmentId=environment["id"])
        assert gone == {"id": environment["id"], "deleted": True}
        again = await fail(mcp, "delete_environment", environmentId=environment["id"])
        status, rest = await _rest(server, "DELETE", f"{API}/environments/{environment['id']}")
        assert status == 404 and again.structured_content == rest
        refused = await fail(mcp, "delete_environment", environmentId="old")
        assert refused.structured_content["errors"] == {"environmentId": "'old' is not a UUID"}


async def test_get_health_answers_what_health_answers(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        health = await call(mcp, "get_health")
    status, rest = await _rest(server, "GET", "/health")
    assert status == 200 and health == rest
    assert health["database"] == "ok"


async def test_export_yaml_writes_what_rest_exports_and_import_yaml_writes_it_back(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="staging", data={"url": "http://h"})
        scenario = await call(
            mcp,
            "create_scenario",
            name="checkout",
            environmentId=environment["id"],
            steps=[{"title": "open", "execCode": "await page.goto(helpers.getEnvUrl())\nlog('ok')"}],
        )
        exported = await call(
            mcp, "export_yaml", kind="scenario", ids=[scenario["id"]], includeEnvironment=True
        )
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"{server.url}{API}/scenarios/export",
                params={"ids": scenario["id"], "includeEnvironment": "true"},
            ) as response,
        ):
            assert exported == {"kind": "scenario", "yaml": await response.text()}
        envs = await call(mcp, "export_yaml", kind="environment", ids=[environment["id"]])
        assert "name: staging" in envs["yaml"]

        edited = exported["yaml"].replace("log('ok')", "log('fixed')")
        report = await call(mcp, "import_yaml", kind="scenario", yaml=edited)
        assert report["updated"]["scenario"] == [scenario["id"]]
        assert report["counts"] == {"created": 0, "updated": 2}
        stored = await call(mcp, "get_scenario", scenarioId=scenario["id"])
        assert stored["steps"][0]["execCode"].endswith("log('fixed')")
        again = await call(mcp, "export_yaml", kind="scenario", ids=[scenario["id"]], includeEnvironment=True)
        # the import made revision 2 of the scenario; the export says so, and is otherwise what went in
        assert again["yaml"] == edited.replace("revision: 1\n", "revision: 2\n")
        assert "revision: 2\n" in again["yaml"]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"kind": "scenarios"}, "kind"),
        ({"kind": "run"}, "kind"),
        ({"kind": "scenario", "ids": ["nope"]}, "ids[0]"),
        ({"kind": "environment"}, "ids"),
        ({"kind": "snippet", "ids": [], "includeEnvironment": True}, "includeEnvironment"),
    ],
)
async def test_bad_export_arguments_are_refused_naming_the_field(
    server: Served, arguments: dict[str, Any], field: str
) -> None:
    async with connect(server.mcp_url) as mcp:
        refused = await fail(mcp, "export_yaml", **arguments)
    problem = refused.structured_content
    assert (problem["status"], problem["title"]) == (400, "Bad Request")
    assert field in problem["errors"], problem


async def test_an_export_of_a_missing_record_is_404_as_over_rest(server: Served) -> None:
    missing = str(uuid.uuid4())
    async with connect(server.mcp_url) as mcp:
        refused = await fail(mcp, "export_yaml", kind="snippet", ids=[missing])
    assert refused.structured_content == await _problem(server, f"{API}/snippets/{missing}/export")


async def test_import_yaml_is_one_transaction_and_refuses_as_rest(server: Served) -> None:
    good = "kind: environment\nname: fine\ndata: {url: 'http://h'}\n"
    bad = good + "---\nkind: environment\nname: ''\n"
    async with connect(server.mcp_url) as mcp:
        refused = await fail(mcp, "import_yaml", kind="environment", yaml=bad)
        status, rest = await _rest(
            server,
            "POST",
            f"{API}/environments/import",
            data=bad,
            headers={"Content-Type": "application/yaml"},
        )
        assert status == 400 and refused.structured_content == rest
        assert "line" in refused.structured_content["detail"]
        wrong = await fail(mcp, "import_yaml", kind="snippet", yaml=good)
        assert wrong.structured_content["status"] == 400
        unknown = await fail(mcp, "import_yaml", kind="runs", yaml=good)
        assert set(unknown.structured_content["errors"]) == {"kind"}
        malformed = await fail(mcp, "import_yaml", kind="environment", yaml="name: [unclosed\n")
        assert malformed.structured_content["status"] == 400
        not_text = await fail(mcp, "import_yaml", kind="environment", yaml={"a": {"b": 1}})
        assert set(not_text.structured_content["errors"]) == {"yaml"}
        assert (await call(mcp, "list_environments"))["total"] == 0
        assert (await call(mcp, "import_yaml", kind="environment", yaml=good))["counts"]["created"] == 1


async def test_an_import_over_the_rest_body_limit_is_refused_413(start_server: ServerFactory) -> None:
    small = await start_server(max_body_bytes=4096)
    text = "kind: environment\nname: big\ndata:\n" + "".join(f"  k{i}: {'v' * 60}\n" for i in range(80))
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{small.url}{API}/environments/import", data=text, headers={"Content-Type": "application/yaml"}
        ) as response:
            assert response.status == 413
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "import_yaml", "arguments": {"kind": "environment", "yaml": text}},
        }
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        async with http.post(small.mcp_url, json=request, headers=headers) as response:
            assert response.status == 413
    assert (await small.services.environments.list()).total == 0


def _png(size: int) -> bytes:
    """Bytes that start as a PNG does, ``size`` long (the tool reads files; it does not decode them)."""
    return b"\x89PNG\r\n\x1a\n" + b"\0" * (size - 8)


async def test_get_run_shows_images_failed_step_first_bounded_and_links_the_rest(server: Served) -> None:
    services = server.services
    environment = await services.environments.create(EnvironmentInput(name="nowhere"))
    scenario = await services.scenarios.create(
        ScenarioInput(name="pictures", steps=(StepInput(exec_code="pass"), StepInput(exec_code="pass")))
    )
    run = await services.runs.create(RunInput(scenario_id=scenario.id, environment_id=environment.id))
    files = {
        "step-2.png": _png(100),  # the failed step's: shown first
        "older.png": _png(200),
        "a.png": _png(300),
        "b.png": _png(400),
        "big.png": _png(MAX_IMAGE_BYTES + 1),  # over the bound: linked
        "c.png": _png(500),  # newest
        "trace.zip": b"PK\x05\x06" + b"\0" * 18,
    }
    folder = services.runs.artifacts_dir(run.id)
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    now = datetime.now(UTC)
    first, second = scenario.steps
    await services.runs.finish(
        run.id,
        RunFinished(
            status="fail",
            error=RunError(kind=RunErrorKind.ASSERTION, message="nope", step_id=second.id),
            step_results=(
                StepResult(step_id=first.id, order=1, status=StepStatus.PASS),
                StepResult(step_id=second.id, order=2, status=StepStatus.FAIL, error="nope"),
            ),
            started_at=now,
            finished_at=now,
        ),
        artifacts=tuple(files),
    )
    async with connect(server.mcp_url) as mcp:
        plain = await mcp.call_tool("get_run", {"runId": str(run.id)})
        assert len(plain.content) == 1  # no images unless asked
        result = await mcp.call_tool("get_run", {"runId": str(run.id), "includeScreenshots": True})
    assert not result.is_error
    images = [base64.b64decode(block.data) for block in result.content if isinstance(block, ImageContent)]
    assert [len(image) for image in images] == [100, 500, 400, 300][:MAX_RUN_IMAGES]
    links = {block.name: block for block in result.content if isinstance(block, ResourceLink)}
    assert set(links) == {"big.png", "older.png", "trace.zip"}
    assert links["trace.zip"].mime_type == "application/zip"
    assert links["big.png"].uri == f"{server.url}{API}/run/{run.id}/artifacts/big.png"
    async with aiohttp.ClientSession() as http, http.get(links["older.png"].uri) as response:
        assert await response.read() == files["older.png"]
    notes = [block.text for block in result.content if isinstance(block, TextContent)][:-1]
    assert notes == [
        f"big.png ({MAX_IMAGE_BYTES + 1} bytes) is over {MAX_IMAGE_BYTES} bytes: linked, not shown."
    ]


async def test_run_scenario_says_one_environment_argument_is_required(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        tool = next(tool for tool in (await mcp.list_tools()).tools if tool.name == "run_scenario")
        assert tool.input_schema["anyOf"] == [
            {"required": ["environmentId"]},
            {"required": ["environmentIds"]},
        ]
        assert "environmentId" in tool.description and "environmentIds" in tool.description
        assert (
            "One of `environmentId` (one run) or `environmentIds` (a batch) is required" in tool.description
        )
        scenario = await call(mcp, "create_scenario", name="somewhere")
        neither = await fail(mcp, "run_scenario", scenarioId=scenario["id"])
        assert set(neither.structured_content["errors"]) == {"environmentId", "environmentIds"}
        nulls = await fail(
            mcp, "run_scenario", scenarioId=scenario["id"], environmentId=None, environmentIds=None
        )
        assert set(nulls.structured_content["errors"]) == {"environmentId", "environmentIds"}
    assert (await server.services.runs.list()).total == 0


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


NEW_TOOLS = {
    "list_runs": {},
    "get_run": {"runId": str(uuid.uuid4())},
    "cancel_run": {"runId": str(uuid.uuid4())},
    "get_scenario_stats": {"scenarioId": str(uuid.uuid4())},
    "list_snippets": {},
    "get_snippet": {"snippetId": str(uuid.uuid4())},
    "list_credentials": {},
    "list_sessions": {},
    "delete_environment": {"environmentId": str(uuid.uuid4())},
    "export_yaml": {"kind": "scenario"},
    "import_yaml": {"kind": "environment", "yaml": "name: x\n"},
    "get_health": {},
}


@pytest.mark.parametrize("tool", sorted(NEW_TOOLS))
async def test_every_new_tool_holds_its_arguments_to_the_json_rule(server: Served, tool: str) -> None:
    async with connect(server.mcp_url) as mcp:
        deep = await fail(mcp, tool, **NEW_TOOLS[tool], extra=_nested(MAX_DEPTH + 1))
        huge = await fail(mcp, tool, **NEW_TOOLS[tool], extra={"n": 2**70})
    for refused, field in ((deep, "extra"), (huge, "extra.n")):
        problem = refused.structured_content
        assert (problem["status"], problem["title"]) == (400, "Bad Request")
        assert any(key.startswith(field) for key in problem["errors"]), problem
    assert (await server.services.environments.list()).total == 0
