"""Helpers of the API tests: the problem-details check, request shortcuts and seeding."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from scenariokit.domain.model import Session, SessionStatus
from scenariokit.services import Services

API = "/api/v1"

#: Run a test on SQLite and on PostgreSQL (skipped with the reason when PostgreSQL does not answer).
both_backends = pytest.mark.parametrize(
    "api_store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]


def assert_problem(path: str, status: int, headers: dict[str, str], body: bytes) -> None:
    """The canonical RFC 9457 shape: type, title, status, detail, and maybe errors (field -> message)."""
    where = f"{status} from {path}"
    assert headers.get("Content-Type", "").startswith("application/problem+json"), where
    data = json.loads(body)
    assert set(data) <= {"type", "title", "status", "detail", "errors"}, where
    assert data["type"] == "about:blank", where
    assert data["title"] == HTTPStatus(status).phrase, where
    assert data["status"] == status, where
    assert isinstance(data["detail"], str) and data["detail"], where
    assert "Traceback" not in data["detail"], where
    if "errors" in data:
        assert data["errors"] and all(
            isinstance(k, str) and isinstance(v, str) for k, v in data["errors"].items()
        )


async def problem_of(response: Any, status: int) -> dict[str, Any]:
    """The problem body of a response, after checking its status."""
    assert response.status == status, await response.text()
    assert response.content_type == "application/problem+json"
    data: dict[str, Any] = await response.json(content_type=None)
    return data


async def created(client: Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` and return the created resource, checking 201 and its Location."""
    response = await client.post(path, json=body)
    assert response.status == 201, await response.text()
    data: dict[str, Any] = await response.json()
    assert response.headers["Location"].endswith(data.get("id") or data.get("credentialId") or "")
    return data


async def seed_session(
    services: Services, *, name: str = "run-x", token: str | None = "tok-123456789-abcd"
) -> Session:
    """Store a saved session as a run would, with a token and storage state."""
    session = Session(
        name=name,
        status=SessionStatus.OPEN,
        token=token,
        storage_state={"cookies": [{"name": "sid", "value": "cookie-secret"}], "origins": []},
    )
    async with services.store.unit_of_work() as uow:
        await uow.sessions.add(session)
        await uow.commit()
    return session
