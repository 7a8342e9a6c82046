"""docs/deployment.md, "Tokens and scopes": over MCP, ``tools/list`` shows a token only the tools its
scope may call, calling another is a tool error naming the scope needed, and the services know the
token's name (the audit log records it)."""

from __future__ import annotations

import aiohttp
import pytest
from mcp_support import Served, ServerFactory, call, connect, fail

from scenariokit.domain.access import Scope
from scenariokit_server.access import TOOL_SCOPES

READER = "reader-token-0123456789"
RUNNER = "runner-token-0123456789"
ADMIN = "admin-token-0123456789ab"


@pytest.fixture
async def team(start_server: ServerFactory) -> Served:
    return await start_server(api_tokens=(f"dash:read:{READER}", f"ci:run:{RUNNER}", f"ops:admin:{ADMIN}"))


@pytest.mark.parametrize(
    ("token", "scope"), [(READER, Scope.READ), (RUNNER, Scope.RUN), (ADMIN, Scope.ADMIN)]
)
async def test_tools_list_shows_only_the_tools_the_token_may_call(
    team: Served, token: str, scope: Scope
) -> None:
    async with connect(team.mcp_url, token=token) as mcp:
        listed = {tool.name for tool in (await mcp.list_tools()).tools}
    assert listed == {name for name, needed in TOOL_SCOPES.items() if needed <= scope}
    assert ("list_scenarios" in listed) and (("create_scenario" in listed) == (scope >= Scope.WRITE))


async def test_calling_a_hidden_tool_is_an_error_naming_the_scope_and_changes_nothing(team: Served) -> None:
    async with connect(team.mcp_url, token=READER) as mcp:
        refused = await fail(mcp, "create_scenario", name="sneaky")
        problem = refused.structured_content
        assert problem is not None and problem["status"] == 403
        assert "scope 'write'" in problem["detail"]
        assert (await call(mcp, "list_scenarios"))["total"] == 0
    async with connect(team.mcp_url, token=RUNNER) as mcp:
        refused = await fail(mcp, "create_schedule", scenarioId="x", environmentIds=[], intervalSeconds=60)
        assert "scope 'admin'" in (refused.structured_content or {})["detail"]


async def test_the_admin_token_calls_every_tool_and_its_writes_are_audited_as_mcp(team: Served) -> None:
    async with connect(team.mcp_url, token=ADMIN) as mcp:
        assert len((await mcp.list_tools()).tools) == len(TOOL_SCOPES)
        created = await call(mcp, "create_scenario", name="by ops")
        assert (await call(mcp, "get_scenario", scenarioId=created["id"]))["name"] == "by ops"
    async with connect(team.mcp_url, token=READER) as mcp:
        await fail(mcp, "delete_scenario", scenarioId=created["id"])
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{team.url}/api/v1/audit", headers={"Authorization": f"Bearer {ADMIN}"}) as response,
    ):
        page = await response.json()
    assert [(e["tokenName"], e["door"], e["action"], e["resourceId"]) for e in page["items"]] == [
        ("ops", "mcp", "create", created["id"])
    ]


async def test_the_upkeep_tools_need_the_scopes_of_their_rest_routes(start_server: ServerFactory) -> None:
    writer = "writer-token-0123456789"
    team = await start_server(api_tokens=(f"dash:read:{READER}", f"dev:write:{writer}"))
    credential = "kind: credential\nname: shop\nusername: ada\nsecret: s3cret\n"
    async with connect(team.mcp_url, token=READER) as mcp:
        listed = {tool.name for tool in (await mcp.list_tools()).tools}
        assert {"list_runs", "get_run", "list_credentials", "export_yaml", "get_health"} <= listed
        assert not {"cancel_run", "import_yaml", "delete_environment"} & listed
        refused = await fail(mcp, "import_yaml", kind="environment", yaml="name: x\n")
        assert (refused.structured_content or {})["status"] == 403
    async with connect(team.mcp_url, token=writer) as mcp:
        refused = await fail(mcp, "import_yaml", kind="credential", yaml=credential)
        problem = refused.structured_content or {}
        assert problem["status"] == 403 and "scope 'admin'" in problem["detail"]
        assert (await call(mcp, "list_credentials"))["total"] == 0
        assert (await call(mcp, "import_yaml", kind="environment", yaml="name: x\n"))["counts"][
            "created"
        ] == 1
