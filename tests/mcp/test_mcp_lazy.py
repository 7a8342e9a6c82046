"""``/mcp`` is mounted without the MCP SDK (``scenariokit_server.mcp_mount``): making the application
imports none of it; the first requests to ``/mcp``, however many arrive together, build the endpoint
once; the application's cleanup stops its session manager, and one that never served MCP built
nothing."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

import scenariokit_server.mcp as mcp_endpoint
from scenariokit.bootstrap import open_services
from scenariokit_server import Settings, create_app
from scenariokit_server.boundary import server_options
from scenariokit_server.mcp import TOOL_HINTS
from scenariokit_server.mcp_mount import LazyMCPEndpoint

SECRET_KEY = "mcp-lazy-test-secret-key"
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def test_making_the_application_imports_no_mcp_sdk() -> None:
    made = (
        "import sys\n"
        "from scenariokit_server import Settings, create_app\n"
        "create_app(Settings(database_url='sqlite://', run_scheduler=False))\n"
        "print(' '.join(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in ('mcp', 'mcp_types') or m == 'scenariokit_server.mcp')))\n"
    )
    done = subprocess.run([sys.executable, "-c", made], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", "imported by create_app: " + done.stdout


def endpoint_of(app: web.Application) -> LazyMCPEndpoint:
    """The lazy endpoint behind the application's ``/mcp`` route."""
    (route,) = [route for route in app.router.named_resources()["mcp"] if route.method == "POST"]
    endpoint = getattr(route.handler, "__self__", None)
    assert isinstance(endpoint, LazyMCPEndpoint)
    return endpoint


def sessions_running() -> list[asyncio.Task[object]]:
    return [task for task in asyncio.all_tasks() if task.get_name() == "scenariokit-mcp-sessions"]


@pytest.mark.parametrize("served_mcp", [True, False], ids=["served MCP", "never served MCP"])
async def test_the_endpoint_is_built_once_by_its_first_requests_and_stopped_with_the_application(
    migrated_sqlite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served_mcp: bool
) -> None:
    built: list[web.Application] = []
    build = mcp_endpoint.build_mcp_endpoint

    def counted(app: web.Application) -> object:
        built.append(app)
        return build(app)

    monkeypatch.setattr(mcp_endpoint, "build_mcp_endpoint", counted)
    shutil.copyfile(migrated_sqlite, tmp_path / "scenariokit.db")
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'scenariokit.db'}",
        secret_key=SECRET_KEY,
        artifacts_dir=tmp_path / "artifacts",
        run_scheduler=False,
        workers=1,
    )
    async with open_services(settings) as services:
        app = create_app(settings, services=services)
        endpoint = endpoint_of(app)
        runner = web.AppRunner(app, access_log=None, **server_options())
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            url = f"http://127.0.0.1:{runner.addresses[0][1]}"
            async with aiohttp.ClientSession(url) as http:
                async with http.get("/health") as health:
                    assert health.status == 200
                assert not endpoint.built and not sessions_running()  # REST builds nothing of MCP
                if served_mcp:

                    async def tools(number: int) -> tuple[int, int]:
                        request = {"jsonrpc": "2.0", "id": number, "method": "tools/list"}
                        async with http.post("/mcp", json=request, headers=HEADERS) as answer:
                            return answer.status, len((await answer.json())["result"]["tools"])

                    answers = await asyncio.gather(*(tools(number) for number in range(6)))
                    assert answers == [(200, len(TOOL_HINTS))] * 6
                    assert built == [app] and endpoint.built and len(sessions_running()) == 1
        finally:
            await runner.cleanup()
        assert not sessions_running()
        # after cleanup a late request is refused: neither the stopped manager nor a new one answers it
        assert not endpoint.built
        with pytest.raises(web.HTTPServiceUnavailable):
            await endpoint.handle(make_mocked_request("POST", "/mcp", app=app))
        assert not sessions_running()
        assert built == ([app] if served_mcp else [])
