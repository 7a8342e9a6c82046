"""The API suite's fixtures: a real app over a real store, driven through pytest-aiohttp's client.

Tests run on a SQLite file copied from one migrated at the start. Those marked with
``api_support.both_backends`` run on PostgreSQL too, each in a schema of its own that is dropped
afterwards. Every error response any test receives is checked for the canonical problem-details
shape when the test ends.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from api_support import Client, ClientFactory, assert_problem

from json_services import json_services
from scenariokit.services import RunSettings, Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.ports import Store
from scenariokit.storage.sqlalchemy import unique_schema
from scenariokit_server import Settings, create_app
from scenariokit_server.boundary import server_options

PG_URL = os.environ.get("SCENARIOKIT_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
SECRET_KEY = "api-test-secret-key"


@pytest.fixture
async def api_store(
    request: pytest.FixtureRequest, migrated_sqlite: Path, tmp_path: Path
) -> AsyncIterator[Store]:
    """An empty store: a copy of the migrated SQLite file, or a new PostgreSQL schema when parametrized so."""
    backend = getattr(request, "param", "sqlite")
    if backend == "sqlite":
        shutil.copyfile(migrated_sqlite, tmp_path / "scenariokit.db")
        url = f"sqlite:///{tmp_path / 'scenariokit.db'}"
    else:
        url = f"{PG_URL}?schema={unique_schema('api')}"
    try:
        store = await open_store(url, secret_key=SECRET_KEY, migrate=backend != "sqlite")
    except OSError as exc:  # connection refused and the like
        pytest.skip(f"PostgreSQL at {PG_URL} is unreachable: {exc}")
    try:
        yield store
    finally:
        drop = getattr(store, "drop_schema", None)
        if drop is not None:
            await drop()
        await store.close()


@pytest.fixture
def artifacts_dir(tmp_path: Path) -> Path:
    """Where runs of the test app keep their files."""
    return tmp_path / "artifacts"


@pytest.fixture
def services(api_store: Store, artifacts_dir: Path) -> Services:
    """The application services over the test store."""
    return json_services(Services(api_store, settings=RunSettings(artifacts_dir=artifacts_dir)))


@pytest.fixture
def settings(artifacts_dir: Path) -> Settings:
    """Settings of the test app: no scheduler, no tokens, CORS closed."""
    return Settings(database_url="sqlite://", run_scheduler=False, artifacts_dir=artifacts_dir, workers=1)


@pytest.fixture
def problems() -> list[tuple[str, int, dict[str, str], bytes]]:
    """Every error response the test's apps sent: (path, status, headers, body)."""
    return []


@pytest.fixture
def make_client(
    aiohttp_client: Any, services: Services, settings: Settings, problems: list[Any]
) -> ClientFactory:
    """Start the app with other settings (``overrides``) or an app of its own, and get a client of it."""

    async def start(app: web.Application | None = None, **overrides: Any) -> Client:
        if app is None:
            app = create_app(Settings(**{**_fields(settings), **overrides}), services=services.typed)
        app.on_response_prepare.append(_recorder(problems))
        server = TestServer(app)  # started here: aiohttp_client would drop the parser's options
        await server.start_server(**server_options())
        client: Client = await aiohttp_client(server)
        return client

    return start


@pytest.fixture
async def client(make_client: ClientFactory, problems: list[Any]) -> AsyncIterator[Client]:
    """A client of the app with the test settings; error responses are checked when the test ends."""
    yield await make_client()


@pytest.fixture(autouse=True)
def _every_error_is_a_problem(problems: list[tuple[str, int, dict[str, str], bytes]]) -> Any:
    """Fail a test whose app answered an error that is not canonical problem details."""
    yield
    for path, status, headers, body in problems:
        assert_problem(path, status, headers, body)


def _fields(settings: Settings) -> dict[str, Any]:
    import attrs

    return attrs.asdict(settings, recurse=False)


def _recorder(problems: list[Any]) -> Callable[[web.Request, web.StreamResponse], Awaitable[None]]:
    async def record(request: web.Request, response: web.StreamResponse) -> None:
        # /health answers 503 with its own body; past auth, /mcp answers JSON-RPC errors, as MCP says.
        json_rpc = request.path.startswith("/mcp") and response.content_type == "application/json"
        if response.status >= 400 and request.path != "/health" and not json_rpc:
            body = response.body if isinstance(response, web.Response) else None
            data = bytes(body) if isinstance(body, bytes | bytearray) else b""
            problems.append((request.path, response.status, dict(response.headers), data))

    return record
