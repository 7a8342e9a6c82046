"""A stored secret the server's keys cannot read answers 503 naming the record, and OpenAPI says so.

That happens when ``SCENARIOKIT_SECRET_KEY`` was replaced instead of rotated (docs/security.md): the
request is fine, the server's configuration is not, so it is a 503 (CONTRACT.md §4), never a 500, and
its detail names the record so an operator can re-enter that one secret.
"""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from api_support import API, Client, both_backends, created, problem_of, seed_session
from cryptography.fernet import Fernet

from scenariokit.services import Services
from scenariokit.storage.sqlalchemy import tables as t

FOREIGN = Fernet(Fernet.generate_key())


async def _spoil(services: Services, table: sa.Table, ident: str, **columns: Any) -> None:
    """Overwrite encrypted columns with what another key wrote."""
    store: Any = services.store
    values = {
        name: FOREIGN.encrypt(value.encode()).decode() if isinstance(value, str) else value
        for name, value in columns.items()
    }
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(table).where(table.c.id == uuid.UUID(ident)).values(**values))


def _documents_503(document: dict[str, Any], method: str, path: str) -> bool:
    template = path.replace(API, "/api/v1")
    for documented, operations in document["paths"].items():
        pattern = documented.split("{")[0]
        if (documented == template or (template.startswith(pattern) and "{" in documented)) and (
            documented.count("/") == template.count("/")
        ):
            op = operations.get(method.lower())
            if op is not None:
                return "503" in op["responses"]
    raise AssertionError(f"{method} {path} is not documented")


@both_backends
async def test_routes_reading_an_unreadable_secret_answer_503_and_document_it(
    client: Client, services: Services
) -> None:
    cred = await created(client, f"{API}/credentials", {"name": "admin", "username": "u", "secret": "pw"})
    session = await seed_session(services)
    await _spoil(services, t.credentials, cred["id"], secret_encrypted="pw")
    await _spoil(services, t.sessions, str(session.id), token_encrypted="tok")
    document = await (await client.get("/docs/openapi.json")).json()
    calls = [
        ("GET", f"{API}/credentials", None),
        ("GET", f"{API}/credentials/{cred['id']}", None),
        ("PATCH", f"{API}/credentials/{cred['id']}", {"username": "v"}),
        ("PUT", f"{API}/credentials/{cred['id']}", {"name": "admin", "username": "w", "secret": "pw2"}),
        ("GET", f"{API}/credentials/{cred['id']}/export", None),
        ("GET", f"{API}/sessions", None),
        ("GET", f"{API}/sessions/{session.id}", None),
    ]
    for method, path, body in calls:
        response = await client.request(method, path, json=body)
        if response.status == 503:
            problem = await problem_of(response, 503)
            assert "cannot be decrypted" in problem["detail"], (method, path, problem)
            assert _documents_503(document, method, path), f"{method} {path} answers 503 undocumented"
        else:
            assert response.status in (200, 204), (method, path, response.status, await response.text())
    # Nothing was changed by the refused writes: the spoiled secret is still what is stored.
    store: Any = services.store
    async with store.engine.connect() as conn:
        row = (
            await conn.execute(sa.select(t.credentials).where(t.credentials.c.id == uuid.UUID(cred["id"])))
        ).one()
    assert row.username == "u"
    assert FOREIGN.decrypt(row.secret_encrypted.encode()) == b"pw"
    # What an operator does next: delete the record whose secret is lost, then create it again.
    assert (await client.delete(f"{API}/credentials/{cred['id']}")).status == 204
    assert (await client.delete(f"{API}/sessions/{session.id}")).status == 204
