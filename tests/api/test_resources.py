"""Environments, credentials, snippets and sessions."""

from __future__ import annotations

import json
import uuid

import pytest
from api_support import API, Client, both_backends, created, problem_of, seed_session

from scenariokit.services import Services

SECRET = "hunter2-very-secret"


@both_backends
async def test_environment_crud_round_trip(client: Client) -> None:
    data = {"url": "http://127.0.0.1:9", "nested": {"list": [1, 2.5, None, True], "text": "é"}}
    environment = await created(
        client, f"{API}/environments", {"name": "staging", "description": "d", "data": data}
    )
    assert environment["data"] == data
    assert set(environment) == {"id", "name", "description", "data", "browser", "createdAt", "updatedAt"}
    url = f"{API}/environments/{environment['id']}"
    assert await (await client.get(url)).json() == environment

    patched = await (await client.patch(url, json={"data": {"baseUrl": "http://b"}})).json()
    assert patched["data"] == {"baseUrl": "http://b"} and patched["description"] == "d"
    put = await (await client.put(url, json={"name": "prod"})).json()
    assert put == {**put, "name": "prod", "description": None, "data": {}}

    assert (await client.delete(url)).status == 204
    await problem_of(await client.get(url), 404)
    await problem_of(await client.delete(url), 404)


async def test_environment_data_must_be_an_object(client: Client) -> None:
    problem = await problem_of(await client.post(f"{API}/environments", json={"name": "x", "data": [1]}), 400)
    assert "data" in problem["errors"]


@both_backends
async def test_credential_secret_is_write_only(client: Client) -> None:
    body = {"name": "admin", "username": "root", "secret": SECRET}
    credential = await created(client, f"{API}/credentials", body)
    assert credential["hasSecret"] is True and "secret" not in credential
    url = f"{API}/credentials/{credential['id']}"

    responses = [
        await client.get(url),
        await client.get(f"{API}/credentials"),
        await client.patch(url, json={"description": "kept secret"}),
        await client.put(url, json={"name": "admin", "username": "root"}),
    ]
    for response in responses:
        assert response.status == 200
        text = await response.text()
        assert SECRET not in text and '"secret"' not in text
    assert (await responses[-1].json())["hasSecret"] is True  # PUT without a secret keeps it

    cleared = await (await client.patch(url, json={"secret": ""})).json()
    assert cleared["hasSecret"] is False
    assert set(cleared) == {"id", "name", "description", "username", "hasSecret", "createdAt", "updatedAt"}


async def test_credential_secret_never_leaks_through_errors(client: Client) -> None:
    response = await client.post(f"{API}/credentials", json={"name": "", "secret": SECRET})
    problem = await problem_of(response, 400)
    assert SECRET not in json.dumps(problem)


@both_backends
async def test_snippet_crud_and_alias_conflict(client: Client) -> None:
    snippet = await created(
        client, f"{API}/snippets", {"alias": "login", "title": "Log in", "code": "return 1"}
    )
    assert set(snippet) == {"id", "alias", "title", "description", "code", "createdAt", "updatedAt"}
    other = await created(client, f"{API}/snippets", {"alias": "logout", "title": "Log out"})

    problem = await problem_of(
        await client.post(f"{API}/snippets", json={"alias": "login", "title": "again"}), 409
    )
    assert "login" in problem["detail"]
    await problem_of(await client.patch(f"{API}/snippets/{other['id']}", json={"alias": "login"}), 409)
    await problem_of(
        await client.put(f"{API}/snippets/{other['id']}", json={"alias": "login", "title": "t"}), 409
    )

    url = f"{API}/snippets/{snippet['id']}"
    assert (await (await client.patch(url, json={"title": "Sign in"})).json())["alias"] == "login"
    put = await (await client.put(url, json={"alias": "signin", "title": "Sign in"})).json()
    assert put["code"] == "" and put["alias"] == "signin"
    assert (await client.delete(url)).status == 204
    await problem_of(await client.get(url), 404)


async def test_snippet_alias_must_be_an_identifier(client: Client) -> None:
    problem = await problem_of(
        await client.post(f"{API}/snippets", json={"alias": "has space", "title": "t"}), 400
    )
    assert "alias" in problem["errors"]


@both_backends
async def test_session_token_is_masked_and_state_omitted(client: Client, services: Services) -> None:
    session = await seed_session(services, token="abcd-0123456789-wxyz")
    short = await seed_session(services, name="short", token="short")
    one = await client.get(f"{API}/sessions/{session.id}")
    assert one.status == 200
    body = await one.json()
    assert body["token"] == "abcd…wxyz"
    assert set(body) == {"id", "name", "status", "token", "runId", "createdAt", "updatedAt"}
    assert (await (await client.get(f"{API}/sessions/{short.id}")).json())["token"] == "…"

    listed = await (await client.get(f"{API}/sessions")).json()
    assert listed["total"] == 2
    for response_text in (await one.text(), json.dumps(listed)):
        assert "0123456789" not in response_text and "cookie-secret" not in response_text

    deleted = await client.delete(f"{API}/sessions/{session.id}")
    assert deleted.status == 204 and await deleted.read() == b""
    await problem_of(await client.get(f"{API}/sessions/{session.id}"), 404)
    await problem_of(await client.delete(f"{API}/sessions/{session.id}"), 404)


@pytest.mark.parametrize("resource", ["environments", "credentials", "snippets", "sessions"])
async def test_missing_and_malformed_ids(client: Client, resource: str) -> None:
    await problem_of(await client.get(f"{API}/{resource}/{uuid.uuid4()}"), 404)
    problem = await problem_of(await client.get(f"{API}/{resource}/123"), 400)
    assert problem["errors"] == {"id": "'123' is not a UUID"}
