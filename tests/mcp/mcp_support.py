"""Helpers of the MCP tests: the official client over streamable HTTP, tool-call shortcuts, a transcript."""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ImageContent, ResourceLink, TextContent

from scenariokit.services import Services

API = "/api/v1"
#: When set, the end-to-end test writes its tool calls and results here (docs/mcp.md shows them).
TRANSCRIPT_ENV = "SCENARIOKIT_MCP_TRANSCRIPT"

ResponseHook = Callable[[httpx2.Response], Awaitable[None]]


@attrs.frozen
class Served:
    """The test app listening on 127.0.0.1, and the services behind it."""

    url: str
    services: Services

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint."""
        return f"{self.url}/mcp"


#: Starts the test app; keyword arguments are settings (``api_tokens=…``).
ServerFactory = Callable[..., Awaitable[Served]]


@contextlib.asynccontextmanager
async def connect(
    url: str, *, token: str | None = None, on_response: ResponseHook | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized official MCP client session over streamable HTTP; ``token`` goes as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    hooks = {"response": [on_response]} if on_response else {}
    async with (
        httpx2.AsyncClient(headers=headers, event_hooks=hooks, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    """Every text block of a result, one per line."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content, checked against its JSON text."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    data: dict[str, Any] = result.structured_content
    last = result.content[-1]
    assert isinstance(last, TextContent) and json.loads(last.text) == data
    return data


async def fail(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    """Call a tool that must fail with a tool error (``isError``), not a protocol error."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, text_of(result)
    return result


@attrs.define
class Transcript:
    """Tool calls and their results as a client saw them, for the documentation's example session."""

    calls: list[dict[str, Any]] = attrs.field(factory=list)

    async def call(self, session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
        """Like :func:`call`, recording the call and its structured result."""
        data = await call(session, tool, **arguments)
        self.calls.append({"tool": tool, "arguments": arguments, "structuredContent": data})
        return data

    async def call_full(self, session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
        """Like :meth:`call`, returning the whole result; images and links are recorded as what they are."""
        result = await session.call_tool(tool, arguments)
        assert not result.is_error, text_of(result)
        shown = [
            {"type": "image", "mimeType": block.mime_type, "bytes": len(base64.b64decode(block.data))}
            if isinstance(block, ImageContent)
            else {"type": "resource_link", "uri": block.uri, "name": block.name}
            for block in result.content
            if isinstance(block, ImageContent | ResourceLink)
        ]
        entry = {"tool": tool, "arguments": arguments, "structuredContent": result.structured_content}
        self.calls.append({**entry, "content": shown} if shown else entry)
        return result

    def save(self) -> None:
        """Write the transcript as JSON where ``SCENARIOKIT_MCP_TRANSCRIPT`` says, if it is set."""
        target = os.environ.get(TRANSCRIPT_ENV)
        if target:
            Path(target).write_text(json.dumps(self.calls, indent=2, ensure_ascii=False) + "\n")
