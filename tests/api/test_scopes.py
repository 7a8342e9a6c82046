"""Scoped, named tokens (docs/deployment.md, "Tokens and scopes"): every route names its scope in one
table, a token without it gets a 403 naming the scope needed, and a malformed token entry refuses to
start naming the entry, never its token."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from aiohttp import web
from api_support import API, Client, ClientFactory, problem_of

from scenariokit.domain.access import Scope
from scenariokit_server.access import ROUTE_SCOPES, TOOL_SCOPES
from scenariokit_server.app import create_app
from scenariokit_server.mcp import TOOL_HINTS
from scenariokit_server.settings import Settings, SettingsError

READER = "reader-token-0123456789"
RUNNER = "runner-token-0123456789"
WRITER = "writer-token-0123456789"
ADMIN = "admin-token-0123456789ab"
BARE = "bare-token-0123456789abc"
TOKENS = (f"dash:read:{READER}", f"ci:run:{RUNNER}", f"agent:write:{WRITER}", f"ops:admin:{ADMIN}", BARE)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def team(make_client: ClientFactory) -> Client:
    """A client of an app with one token of each scope and a bare one."""
    return await make_client(api_tokens=TOKENS)


def test_every_route_and_tool_names_its_scope_in_the_one_table(tmp_path: Any) -> None:
    app = create_app(Settings(api_tokens=TOKENS, database_url=f"sqlite+aiosqlite:///{tmp_path}/s.db"))
    served = set()
    for route in app.router.routes():
        if route.method in ("OPTIONS", "HEAD", "*"):
            continue
        resource = route.resource
        assert resource is not None
        key = (route.method, resource.canonical)
        served.add(key)
        assert key in ROUTE_SCOPES, f"{key} has no scope in scenariokit_server.access.ROUTE_SCOPES"
    assert set(ROUTE_SCOPES) <= served, "the table names routes that do not exist"
    assert set(TOOL_SCOPES) == set(TOOL_HINTS)
    # every write is at least `write` but runs (`run`); reads are `read`
    assert all(scope is None or scope == Scope.READ for (m, _), scope in ROUTE_SCOPES.items() if m == "GET"
               and _ != f"{API}/audit")  # fmt: skip
    assert ROUTE_SCOPES[("GET", f"{API}/audit")] == Scope.ADMIN


async def _ids(client: Client) -> tuple[str, str]:
    env = await client.post(f"{API}/environments", json={"name": "e", "data": {}}, headers=bearer(ADMIN))
    scenario = await client.post(f"{API}/scenarios", json={"name": "s"}, headers=bearer(ADMIN))
    assert env.status == 201 and scenario.status == 201
    return (await env.json())["id"], (await scenario.json())["id"]


@pytest.mark.parametrize(
    ("token", "allowed"),
    [
        (READER, {"read"}),
        (RUNNER, {"read", "run"}),
        (WRITER, {"read", "run", "write"}),
        (ADMIN, {"read", "run", "write", "admin"}),
        (BARE, {"read", "run", "write", "admin"}),  # a bare token keeps full access, as before scopes
    ],
)
async def test_each_scope_holds_the_ones_below_it_and_no_more(
    team: Client, token: str, allowed: set[str]
) -> None:
    env_id, scenario_id = await _ids(team)
    attempts = {
        "read": ("GET", f"{API}/scenarios", None),
        "run": ("POST", f"{API}/run", {"scenarioId": scenario_id, "environmentId": env_id}),
        "write": ("POST", f"{API}/snippets", {"alias": "a1", "title": "t", "code": "pass"}),
        "admin": ("POST", f"{API}/credentials", {"name": "c", "username": "u", "secret": "s3cr3t"}),
    }
    for scope, (method, path, body) in attempts.items():
        response = await team.request(method, path, json=body, headers=bearer(token))
        if scope in allowed:
            assert response.status in (200, 201), (scope, await response.text())
        else:
            problem = await problem_of(response, 403)
            assert f"scope {scope!r}" in problem["detail"]
            assert token not in problem["detail"]


async def test_a_refused_write_changes_nothing_and_names_the_token(team: Client) -> None:
    response = await team.post(f"{API}/scenarios", json={"name": "nope"}, headers=bearer(READER))
    problem = await problem_of(response, 403)
    assert problem["detail"] == "this request needs a token with scope 'write'; token 'dash' has scope 'read'"
    listed = await (await team.get(f"{API}/scenarios", headers=bearer(READER))).json()
    assert listed["total"] == 0


async def test_an_export_with_secrets_needs_admin(team: Client) -> None:
    await team.post(f"{API}/credentials", json={"name": "c", "secret": "s3cr3t"}, headers=bearer(ADMIN))
    plain = await team.get(f"{API}/scenarios/export", headers=bearer(READER))
    assert plain.status == 200
    for value in ("true", "1", "TRUE"):
        refused = await team.get(f"{API}/scenarios/export?includeSecrets={value}", headers=bearer(WRITER))
        assert "scope 'admin'" in (await problem_of(refused, 403))["detail"]
    allowed = await team.get(f"{API}/scenarios/export?includeSecrets=true", headers=bearer(ADMIN))
    assert allowed.status == 200


async def test_without_a_token_it_is_still_401_whatever_the_scope(team: Client) -> None:
    await problem_of(await team.get(f"{API}/audit"), 401)
    await problem_of(await team.get(f"{API}/scenarios", headers=bearer("not-a-token-0123456789")), 401)


async def test_the_caller_is_named_for_the_services(
    make_client: ClientFactory, settings: Settings, services: Any
) -> None:
    from scenariokit.services.caller import current_caller

    seen: list[Any] = []

    async def who(request: web.Request) -> web.Response:
        seen.append(current_caller())
        return web.json_response({})

    app = create_app(attrs.evolve(settings, api_tokens=TOKENS), services=services.typed)
    app.router.add_get(f"{API}/whoami", who)
    client = await make_client(app)
    response = await client.get(f"{API}/whoami", headers=bearer(READER))
    assert response.status == 403  # a route missing from the table is admin's alone
    assert (await client.get(f"{API}/whoami", headers=bearer(ADMIN))).status == 200
    assert (seen[0].door, seen[0].token_name, seen[0].scope) == ("rest", "ops", Scope.ADMIN)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (("ops:superuser:" + "x" * 20,), "entry 1: unknown scope; use one of read, run, write, admin"),
        ((ADMIN, "ci:run:short-token"), "entry 2: the token is shorter than 16 characters"),
        ((f"ci:run:{RUNNER}", f"ci:read:{READER}"), "entry 2: the name 'ci' is already given to entry 1"),
        ((f"a:read:{READER}", f"b:admin:{READER}"), "entry 2: the token repeats the token of entry 1"),
        (("bad name:read:" + "y" * 20,), "entry 1: the name must be"),
        (("name:" + "y" * 20,), "entry 1: write it as name:scope:token"),
        (("tiny-secret",), "entry 1: the token is shorter than 16 characters"),
    ],
)
def test_a_malformed_entry_refuses_to_start_naming_its_position_never_its_token(
    entries: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SettingsError, match="SCENARIOKIT_API_TOKENS") as refused:
        Settings.from_env({"SCENARIOKIT_API_TOKENS": ",".join(entries)})
    text = str(refused.value)
    assert message in text
    for entry in entries:
        assert entry.rsplit(":", 1)[-1] not in text


def test_entries_parse_into_named_scoped_tokens() -> None:
    settings = Settings.from_env({"SCENARIOKIT_API_TOKENS": ",".join(TOKENS)})
    assert [(t.name, t.scope.label) for t in settings.tokens] == [
        ("dash", "read"),
        ("ci", "run"),
        ("agent", "write"),
        ("ops", "admin"),
        (None, "admin"),
    ]
    assert READER not in repr(settings.tokens) and READER not in repr(settings)


def test_serve_with_a_malformed_entry_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from scenariokit.cli import main

    monkeypatch.setenv("SCENARIOKIT_API_TOKENS", f"ops:admin:{ADMIN},ci:sudo:{RUNNER}")
    database = tmp_path / "never.db"
    assert main(["serve", "--port", "0", "--database-url", f"sqlite:///{database}"]) == 2
    error = capsys.readouterr().err
    assert "SCENARIOKIT_API_TOKENS entry 2: unknown scope" in error
    assert RUNNER not in error and ADMIN not in error
    assert not database.exists()
