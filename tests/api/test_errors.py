"""Every error is RFC 9457 problem details, from one middleware and one table of statuses."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from api_support import API, Client, ClientFactory, problem_of

from scenariokit.domain.errors import (
    BrowserUnavailable,
    Conflict,
    InvalidQuery,
    NotFound,
    ScenarioKitError,
    TooLarge,
    ValidationError,
)
from scenariokit.services import Services
from scenariokit_server import Settings, create_app


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "$"),
        (b"", "$"),
        (b"\xff\xfe", "$"),
        (b"[1, 2]", "$"),
        (b'"text"', "$"),
        (b'{"name": "a\\u0000b"}', "name"),
        (b'{"name": "ok", "data": {"k": ["\\ud800"]}}', "data.k[0]"),
    ],
)
async def test_bad_bodies_give_400(client: Client, body: bytes, field: str) -> None:
    response = await client.post(
        f"{API}/environments", data=body, headers={"Content-Type": "application/json"}
    )
    problem = await problem_of(response, 400)
    assert field in problem["errors"]


async def test_unknown_route_gives_404(client: Client) -> None:
    problem = await problem_of(await client.get("/api/v1/nothing-here"), 404)
    assert problem["title"] == "Not Found"
    await problem_of(await client.get("/"), 404)


async def test_wrong_method_gives_405_with_allow(client: Client) -> None:
    response = await client.delete(f"{API}/scenarios")
    await problem_of(response, 405)
    assert set(response.headers["Allow"].split(",")) >= {"GET", "POST"}
    response = await client.post(f"{API}/sessions")
    await problem_of(response, 405)
    assert "GET" in response.headers["Allow"]


async def test_oversized_body_gives_413(make_client: ClientFactory) -> None:
    client = await make_client(max_body_bytes=1024)
    response = await client.post(f"{API}/scenarios", json={"name": "x", "description": "y" * 2048})
    problem = await problem_of(response, 413)
    assert "1024" in problem["detail"]
    small = await client.post(f"{API}/scenarios", json={"name": "x", "description": "y" * 512})
    assert small.status == 201


async def test_server_fault_gives_500_without_a_stack_trace(
    make_client: ClientFactory, services: Services, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("internal detail: password=hunter2")

    app = create_app(settings, services=services)
    app.router.add_get(f"{API}/broken", broken)
    client = await make_client(app)
    with caplog.at_level(logging.ERROR, logger="scenariokit_server.errors"):
        response = await client.get(f"{API}/broken")
    problem = await problem_of(response, 500)
    text = await response.text()
    assert "hunter2" not in text and "Traceback" not in text and "RuntimeError" not in text
    assert problem["detail"]
    assert any("hunter2" in (record.exc_text or "") or record.exc_info for record in caplog.records)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ValidationError("bad input", {"name": "is required"}), 400),
        (InvalidQuery("bad query", {"page": "must be a whole number"}), 400),
        (NotFound("scenario", "x"), 404),
        (Conflict("already there"), 409),
        (TooLarge("too big"), 413),
        (BrowserUnavailable("no chromium"), 503),
        (ScenarioKitError("unexpected"), 500),
    ],
)
async def test_domain_errors_map_to_their_status(
    make_client: ClientFactory, services: Services, settings: Settings, error: Exception, status: int
) -> None:
    async def failing(request: web.Request) -> web.Response:
        raise error

    app = create_app(settings, services=services)
    app.router.add_get(f"{API}/failing", failing)
    client = await make_client(app)
    problem = await problem_of(await client.get(f"{API}/failing"), status)
    if isinstance(error, ValidationError):
        assert problem["errors"] == error.errors and problem["detail"] == error.message
    elif status != 500:
        assert problem["detail"] == str(error)
