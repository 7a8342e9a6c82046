"""docs/rest.md, "Authentication": with API tokens set, ``/mcp`` needs ``Authorization: Bearer <token>``."""

from __future__ import annotations

import aiohttp
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_support import Served, ServerFactory, call, connect

from scenariokit_server.mcp import TOOL_HINTS

TOKEN = "mcp-test-token-0123456789"


@pytest.fixture
async def guarded(start_server: ServerFactory) -> Served:
    """The app with two API tokens."""
    return await start_server(api_tokens=("another-token-0123456789", TOKEN))


@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_the_official_client_without_the_token_is_refused_with_401(
    guarded: Served, token: str | None
) -> None:
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    with pytest.raises(ExceptionGroup) as refused:  # the SDK's error comes out of its task groups
        async with connect(guarded.mcp_url, token=token, on_response=record):
            pytest.fail("the session must not initialize without the token")
    assert refused.group_contains(MCPError, match="error response")
    assert statuses == [401]


async def test_the_official_client_with_the_token_works(guarded: Served) -> None:
    async with connect(guarded.mcp_url, token=TOKEN) as mcp:
        assert len((await mcp.list_tools()).tools) == len(TOOL_HINTS)  # every tool
        created = await call(mcp, "create_scenario", name="guarded")
        assert (await call(mcp, "get_scenario", scenarioId=created["id"]))["name"] == "guarded"


async def test_a_request_without_the_token_gets_a_401_problem_before_the_mcp_server(guarded: Served) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with aiohttp.ClientSession() as http:
        for path in ("/mcp", "/mcp/"):
            async with http.post(guarded.url + path, json=request) as response:
                assert response.status == 401
                assert response.headers["WWW-Authenticate"].startswith("Bearer")
                assert response.content_type == "application/problem+json"
                assert (await response.json(content_type=None))["status"] == 401
        async with http.get(guarded.url + "/health") as response:
            assert response.status != 401
