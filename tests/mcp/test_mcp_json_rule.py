"""MCP tool arguments follow REST's JSON rule and come back refused as REST's problem bodies."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from mcp_support import Served, call, connect, fail

from scenariokit.domain.json_values import MAX_DEPTH


def _nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def _assert_problem(problem: dict[str, Any], field: str) -> None:
    assert set(problem) <= {"type", "title", "status", "detail", "errors"}
    assert problem["status"] == 400 and problem["title"] == "Bad Request"
    assert any(key.startswith(field) for key in problem["errors"]), problem


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"data": _nested(MAX_DEPTH + 1)}, "data"),
        ({"data": {"big": 2**70}}, "data.big"),
        ({"data": {"small": -(2**64)}}, "data.small"),
    ],
)
async def test_values_no_store_keeps_are_refused_like_rest(
    server: Served, arguments: dict[str, Any], field: str
) -> None:
    async with connect(server.mcp_url) as mcp:
        result = await fail(mcp, "create_environment", name="poison", **arguments)
        assert result.structured_content is not None
        _assert_problem(result.structured_content, field)
        assert (await call(mcp, "list_environments"))["total"] == 0
        # at the limit it is kept, and every read renders it again
        await call(mcp, "create_environment", name="deep", data=_nested(MAX_DEPTH - 1))
        assert (await call(mcp, "list_environments"))["total"] == 1


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("create_environment", {}, "name"),
        ("create_environment", {"name": 5}, "name"),
        ("run_scenario", {"scenarioId": "x", "environmentId": "y", "wait": "soon"}, "wait"),
    ],
)
async def test_argument_errors_are_problem_bodies(
    server: Served, tool: str, arguments: dict[str, Any], field: str
) -> None:
    async with connect(server.mcp_url) as mcp:
        result = await fail(mcp, tool, **arguments)
        assert result.structured_content is not None, result
        _assert_problem(result.structured_content, field)
        assert "pydantic" not in json.dumps(result.structured_content)


async def test_nan_sent_raw_is_refused(server: Served) -> None:
    """The official client turns NaN into null; a raw request keeps it, and the rule refuses it."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "create_environment", "arguments": {"name": "nan", "data": {"x": "NAN"}}},
    }
    body = json.dumps(request).replace('"NAN"', "NaN")
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(server.mcp_url, data=body, headers=headers) as answer,
    ):
        text = await answer.text()
    assert answer.status == 200, text
    result = json.loads(text)["result"]
    assert result["isError"] is True
    _assert_problem(result["structuredContent"], "data.x")
    async with connect(server.mcp_url) as mcp:
        assert (await call(mcp, "list_environments"))["total"] == 0
