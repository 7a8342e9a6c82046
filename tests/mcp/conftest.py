"""The MCP suite's fixtures: the real app served on a 127.0.0.1 port over a SQLite store in tmp_path, a
scheduler with a real Chromium worker, and a page for runs to visit.

The official client's session holds an anyio task group, which must be left by the task that entered
it, so tests open it themselves (``async with connect(...)``) rather than through a fixture.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from mcp_support import Served, ServerFactory

from scenariokit.bootstrap import open_services, running_scheduler
from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit_server import Settings, create_app
from scenariokit_server.boundary import server_options

SECRET_KEY = "mcp-test-secret-key"
HELLO_PAGE = "<!doctype html><html><head><title>Hello page</title></head><body><h1>Hello</h1></body></html>"


@contextlib.asynccontextmanager
async def serving(database: Path, artifacts: Path, **overrides: Any) -> AsyncIterator[Served]:
    """The app over the SQLite file ``database``, listening on a free 127.0.0.1 port, with no scheduler."""
    settings = Settings(
        database_url=f"sqlite:///{database}",
        secret_key=SECRET_KEY,
        artifacts_dir=artifacts,
        run_scheduler=False,
        workers=1,
        **overrides,
    )
    async with open_services(settings) as services:
        app = create_app(settings, services=services)
        assert "mcp" in app.router.named_resources(), "create_app mounts /mcp"
        runner = web.AppRunner(app, access_log=None, **server_options())
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            yield Served(url=f"http://127.0.0.1:{runner.addresses[0][1]}", services=services)
        finally:
            await runner.cleanup()


@pytest.fixture
async def start_server(migrated_sqlite: Path, tmp_path: Path) -> AsyncIterator[ServerFactory]:
    """Start the app over a new SQLite store; keyword arguments are settings (``api_tokens=…``).

    The app runs no scheduler of its own: a test that executes runs takes the ``scheduler`` fixture.
    """
    numbers = itertools.count()
    async with contextlib.AsyncExitStack() as stack:

        async def start(**overrides: Any) -> Served:
            database = tmp_path / f"scenariokit-{next(numbers)}.db"
            shutil.copyfile(migrated_sqlite, database)
            return await stack.enter_async_context(serving(database, tmp_path / "artifacts", **overrides))

        yield start


@pytest.fixture
async def server(start_server: ServerFactory) -> Served:
    """The app with the default test settings (no API tokens)."""
    return await start_server()


@pytest.fixture
def server_in_thread(migrated_sqlite: Path, tmp_path: Path) -> Iterator[str]:
    """The base URL of the app served by an event loop in a thread of its own.

    A test whose request would stall the server's event loop then fails on its own timeout instead of
    hanging the suite.
    """
    shutil.copyfile(migrated_sqlite, tmp_path / "scenariokit.db")
    started: concurrent.futures.Future[tuple[str, asyncio.Event]] = concurrent.futures.Future()

    async def serve() -> None:
        try:
            async with serving(tmp_path / "scenariokit.db", tmp_path / "artifacts") as served:
                stopping = asyncio.Event()
                started.set_result((served.url, stopping))
                await stopping.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="mcp-test-server", daemon=True)
    thread.start()
    done = asyncio.run_coroutine_threadsafe(serve(), loop)
    try:
        url, stopping = started.result(30)
        yield url
        loop.call_soon_threadsafe(stopping.set)
        done.result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        if not thread.is_alive():
            loop.close()


@pytest.fixture
async def scheduler(server: Served) -> AsyncIterator[Scheduler]:
    """A scheduler with one Chromium worker executing the server's runs."""
    async with running_scheduler(server.services, workers=1) as started:
        yield started


@pytest.fixture
async def hello_site() -> AsyncIterator[str]:
    """The base URL of a page on 127.0.0.1 that says Hello."""

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=HELLO_PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()
