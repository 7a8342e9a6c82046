"""``/mcp`` mounted without the MCP SDK: the SDK is imported, and the endpoint built, on its first request.

Importing the SDK (its types, its pydantic models, its server) takes about 0.8 s of CPU, 40% of what a
server process spends on imports, and most servers never serve MCP: each of ``--processes N``, every
process a test starts. So the routes (and with them CORS, the boundary's checks and the scopes) are
added as the application is made, and the first request to ``/mcp`` imports
:mod:`scenariokit_server.mcp` in a thread (the event loop goes on answering meanwhile), builds the
endpoint once however many requests arrive together, and starts its session manager; the application's
cleanup stops it, before the services close, as when it was started with the application.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.typedefs import Handler

MCP_PATH = "/mcp"


class LazyMCPEndpoint:
    """The ``/mcp`` handler of one application, built on its first request and stopped with it."""

    def __init__(self, app: web.Application) -> None:
        self._app = app
        self._handler: Handler | None = None
        self._building = asyncio.Lock()
        self._running = contextlib.AsyncExitStack()
        self._closed = False

    @property
    def built(self) -> bool:
        """Whether a request has built the endpoint (and imported the SDK) and it still runs."""
        return self._handler is not None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer an MCP request, building the endpoint first if no request has yet."""
        handler = self._handler or await self._build()
        return await handler(request)

    async def _build(self) -> Handler:
        async with self._building:
            if self._handler is not None:  # another request built it while this one waited
                return self._handler
            if self._closed:
                raise web.HTTPServiceUnavailable(text="the service is stopping")
            module = await asyncio.to_thread(importlib.import_module, "scenariokit_server.mcp")
            handler, manager = module.build_mcp_endpoint(self._app)
            await self._running.enter_async_context(module.session_manager_running(manager))
            self._handler = handler
            return handler

    async def lifetime(self, app: web.Application) -> AsyncIterator[None]:
        """The application's ``cleanup_ctx`` entry: on cleanup, stop the session manager if it started;
        a request after that is answered 503, never by the stopped manager nor by a new one."""
        yield
        async with self._building:  # a build under way finishes first, then is stopped
            self._closed = True
            self._handler = None
            await self._running.aclose()


def setup_mcp(app: web.Application) -> LazyMCPEndpoint:
    """Mount ``/mcp`` on ``app``, built on its first request (see the module's text).

    Call this after the services' lifecycle is added: cleanup then stops the MCP endpoint before the
    services close.
    """
    endpoint = LazyMCPEndpoint(app)
    app.router.add_post(MCP_PATH, endpoint.handle, name="mcp")
    app.router.add_post(MCP_PATH + "/", endpoint.handle)
    app.cleanup_ctx.append(endpoint.lifetime)
    return endpoint
