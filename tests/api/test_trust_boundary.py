"""The HTTP trust boundary: Host, Origin, Content-Type on `/api/v1` and `/mcp`, long URLs, CORS defaults.

Each refusal is replayed against the real app and followed by reads proving that nothing was stored and
nothing was queued to run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from api_support import API, Client, ClientFactory, created, problem_of

from scenariokit_server.app import check_bind
from scenariokit_server.boundary import host_name, host_rule, origin_rule
from scenariokit_server.settings import Settings, SettingsError

EVIL_ORIGIN = "http://evil.example"
REBIND_HOST = "rebind.attacker.example:13000"
TOKEN = "a-token-of-24-characters"
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "boundary-test", "version": "1"},
    },
}


def _import_yaml(marker: Path) -> str:
    """A scenario whose only step writes ``marker``: what a cross-site page would smuggle in."""
    return (
        "kind: scenario\n"
        "name: smuggled\n"
        "steps:\n"
        "  - title: write\n"
        "    execCode: |\n"
        f"      open({str(marker)!r}, 'w').write('ran')\n"
    )


async def _nothing_stored(client: Client) -> None:
    for resource in ("scenarios", "run", "environments"):
        response = await client.get(f"{API}/{resource}")
        assert response.status == 200
        assert (await response.json())["total"] == 0, resource


async def test_the_cross_site_pair_is_refused_and_nothing_runs(client: Client, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    cross_site = {"Content-Type": "text/plain", "Origin": EVIL_ORIGIN, "Host": REBIND_HOST}
    imported = await client.post(f"{API}/scenarios/import", data=_import_yaml(marker), headers=cross_site)
    await problem_of(imported, 421)
    body = json.dumps({"scenarioId": "00000000-0000-4000-8000-000000000000", "environmentId": None})
    run = await client.post(f"{API}/run", data=body, headers=cross_site)
    await problem_of(run, 421)
    await _nothing_stored(client)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "application/yaml", "Origin": EVIL_ORIGIN}, 403),
        ({"Content-Type": "application/yaml", "Host": REBIND_HOST}, 421),
    ],
)
async def test_each_rule_alone_stops_the_pair(
    client: Client, tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    marker = tmp_path / "ran.txt"
    environment = await created(client, f"{API}/environments", {"name": "e", "data": {}})
    scenario = await created(client, f"{API}/scenarios", {"name": "legit", "steps": []})
    imported = await client.post(f"{API}/scenarios/import", data=_import_yaml(marker), headers=headers)
    await problem_of(imported, status)
    run_headers = {**headers, "Content-Type": "application/json"} if status != 415 else headers
    body = json.dumps({"scenarioId": scenario["id"], "environmentId": environment["id"]})
    await problem_of(await client.post(f"{API}/run", data=body, headers=run_headers), status)
    scenarios = await (await client.get(f"{API}/scenarios")).json()
    assert [item["name"] for item in scenarios["items"]] == ["legit"]
    assert (await (await client.get(f"{API}/run")).json())["total"] == 0
    assert not marker.exists()


async def test_a_yaml_import_takes_each_yaml_type_and_nothing_else(client: Client) -> None:
    for index, content_type in enumerate(("application/yaml", "application/x-yaml", "text/yaml")):
        text = f"kind: environment\nname: env-{index}\ndata: {{}}\n"
        response = await client.post(
            f"{API}/environments/import", data=text, headers={"Content-Type": content_type}
        )
        assert response.status == 200, await response.text()
    for content_type in ("application/json", "text/plain", "application/x-www-form-urlencoded"):
        response = await client.post(
            f"{API}/environments/import", data="name: other\n", headers={"Content-Type": content_type}
        )
        await problem_of(response, 415)
    listed = await (await client.get(f"{API}/environments")).json()
    assert listed["total"] == 3


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
async def test_a_json_body_needs_a_json_content_type(client: Client, content_type: str | None) -> None:
    body = json.dumps({"name": "x", "data": {}}).encode()
    for method, path in (("POST", f"{API}/environments"), ("POST", f"{API}/scenarios")):
        response = await client.request(
            method, path, data=body, headers={"Content-Type": content_type} if content_type else {}
        )
        if content_type is None:  # aiohttp's client labels bytes application/octet-stream
            assert response.headers["Content-Type"].startswith("application/problem+json")
        await problem_of(response, 415)
    await _nothing_stored(client)
    ok = await client.post(
        f"{API}/environments", data=body, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert ok.status == 201


async def test_updates_and_deletes_follow_the_same_rule(client: Client) -> None:
    environment = await created(client, f"{API}/environments", {"name": "e", "data": {"k": 1}})
    path = f"{API}/environments/{environment['id']}"
    plain = {"Content-Type": "text/plain"}
    await problem_of(await client.patch(path, data='{"name": "changed"}', headers=plain), 415)
    await problem_of(await client.put(path, data='{"name": "changed"}', headers=plain), 415)
    await problem_of(await client.delete(path, headers={"Origin": EVIL_ORIGIN}), 403)
    await problem_of(await client.delete(path, headers={"Host": REBIND_HOST}), 421)
    read = await client.get(path)
    assert (await read.json())["name"] == "e"


@pytest.mark.parametrize("host", ["localhost", "localhost:13000", "127.0.0.1:1", "[::1]:8080", "LOCALHOST"])
async def test_a_loopback_bind_answers_every_loopback_name(client: Client, host: str) -> None:
    response = await client.get(f"{API}/credentials", headers={"Host": host})
    assert response.status == 200


@pytest.mark.parametrize(
    "host", [REBIND_HOST, "attacker.example", "127.0.0.1.nip.io", "localhost.evil.example"]
)
async def test_a_foreign_host_cannot_read(client: Client, host: str) -> None:
    await created(client, f"{API}/credentials", {"name": "c", "username": "u", "secret": "s"})
    for path in (f"{API}/credentials", f"{API}/scenarios/export", f"{API}/run"):
        problem = await problem_of(await client.get(path, headers={"Host": host}), 421)
        assert "SCENARIOKIT_ALLOWED_HOSTS" in problem["detail"]
    assert (await client.get("/health", headers={"Host": host})).status == 200
    assert (await client.get("/docs/openapi.json", headers={"Host": host})).status == 200


async def test_allowed_hosts_add_names(make_client: ClientFactory) -> None:
    client = await make_client(allowed_hosts=("scenariokit.internal", "ci.example:8443"))
    for host in ("scenariokit.internal", "scenariokit.internal:13000", "ci.example", "localhost:1"):
        assert (await client.get(f"{API}/scenarios", headers={"Host": host})).status == 200, host
    await problem_of(await client.get(f"{API}/scenarios", headers={"Host": "other.example"}), 421)


async def test_mcp_shares_the_rule(client: Client) -> None:
    accept = {"Accept": "application/json, text/event-stream"}
    body = json.dumps(MCP_INIT)
    cases = [
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "application/json", "Origin": EVIL_ORIGIN}, 403),
        ({"Content-Type": "application/json", "Host": REBIND_HOST}, 421),
    ]
    for headers, status in cases:
        response = await client.post("/mcp", data=body, headers={**accept, **headers})
        await problem_of(response, status)
    fine = await client.post("/mcp", data=body, headers={**accept, "Content-Type": "application/json"})
    assert fine.status == 200, await fine.text()
    local_page = {"Content-Type": "application/json", "Origin": "http://localhost:5173"}
    assert (await client.post("/mcp", data=body, headers={**accept, **local_page})).status == 200


async def test_a_frontend_on_a_loopback_port_gets_its_preflight_by_default(client: Client) -> None:
    for origin in ("http://localhost:5173", "http://127.0.0.1:3000", "http://[::1]:8080"):
        response = await client.options(
            f"{API}/scenarios",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert response.status == 200, origin
        assert response.headers["Access-Control-Allow-Origin"] == origin
        made = await client.post(f"{API}/scenarios", json={"name": origin}, headers={"Origin": origin})
        assert made.status == 201
        assert made.headers["Access-Control-Allow-Origin"] == origin


async def test_a_listed_origin_replaces_the_loopback_default(make_client: ClientFactory) -> None:
    client = await make_client(cors_origins=("http://ui.example",))
    await problem_of(
        await client.post(
            f"{API}/scenarios", json={"name": "x"}, headers={"Origin": "http://localhost:5173"}
        ),
        403,
    )
    listed = await client.post(
        f"{API}/scenarios", json={"name": "x"}, headers={"Origin": "http://ui.example"}
    )
    assert listed.status == 201
    # the server's own pages (Swagger UI at /docs) post with their own origin
    host = f"127.0.0.1:{client.port}"
    own = await client.post(
        f"{API}/scenarios", json={"name": "y"}, headers={"Origin": f"http://{host}", "Host": host}
    )
    assert own.status == 201


async def test_a_non_loopback_bind_has_no_default_cors(make_client: ClientFactory) -> None:
    client = await make_client(host="0.0.0.0", api_tokens=(TOKEN,))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    response = await client.options(
        f"{API}/scenarios",
        headers={"Origin": "http://localhost:5173", "Access-Control-Request-Method": "GET"},
    )
    assert response.status != 200 and "Access-Control-Allow-Origin" not in response.headers
    refused = await client.post(
        f"{API}/scenarios", json={"name": "x"}, headers={**auth, "Origin": "http://localhost:5173"}
    )
    await problem_of(refused, 403)
    # tokens and no allowed hosts on a wildcard bind: any Host, the token is the guard
    anywhere = await client.get(f"{API}/scenarios", headers={**auth, "Host": "scenariokit.example.com"})
    assert anywhere.status == 200


async def test_a_url_over_8_kib_gets_a_problem(client: Client) -> None:
    problem = await problem_of(await client.get(f"{API}/scenarios?q=" + "x" * 9000), 414)
    assert "8192" in problem["detail"]
    problem = await problem_of(await client.get("/health?x=" + "y" * 9000), 414)
    assert (await client.get(f"{API}/scenarios?q=" + "x" * 100)).status == 200


@pytest.mark.parametrize("tokens", ["short", "ok-token-0123456789,short-again"])
def test_a_short_token_refuses_to_start(tokens: str) -> None:
    with pytest.raises(SettingsError, match="shorter than 16") as refused:
        Settings.from_env({"SCENARIOKIT_API_TOKENS": tokens})
    assert "short" not in str(refused.value).replace("shorter", "")  # the message never shows a token
    with pytest.raises(SettingsError):
        Settings(api_tokens=("fifteen-chars!!",))
    Settings(api_tokens=("sixteen-chars!!!",))


def test_host_rules_of_each_bind() -> None:
    assert host_rule(Settings()).names == {"localhost", "127.0.0.1", "[::1]"}
    assert host_rule(Settings(host="::1")).names == {"localhost", "127.0.0.1", "[::1]"}
    assert host_rule(Settings(host="10.0.0.5", api_tokens=(TOKEN,))).names == {"10.0.0.5"}
    assert host_rule(Settings(host="0.0.0.0", api_tokens=(TOKEN,))).names is None
    wildcard = host_rule(Settings(host="0.0.0.0", api_tokens=(TOKEN,), allowed_hosts=("ci.example",)))
    assert wildcard.names == {"localhost", "127.0.0.1", "[::1]", "ci.example"}
    assert host_rule(Settings(allowed_hosts=("*",))).names is None
    assert host_name("Example.COM.:80") == "example.com" and host_name("::1") == "[::1]"


def test_a_wildcard_bind_without_tokens_needs_allowed_hosts() -> None:
    with pytest.raises(SettingsError, match="SCENARIOKIT_ALLOWED_HOSTS"):
        check_bind(Settings(host="0.0.0.0", insecure=True))
    check_bind(Settings(host="0.0.0.0", insecure=True, allowed_hosts=("*",)))


def test_origin_rules() -> None:
    loopback = origin_rule(Settings())
    assert loopback.allows("http://localhost:5173") and loopback.allows("http://[::1]")
    assert not loopback.allows("http://localhost.evil.example") and not loopback.allows("null")
    assert not origin_rule(Settings(host="0.0.0.0", api_tokens=(TOKEN,))).allows("http://localhost:5173")
    assert origin_rule(Settings(cors_origins=("*",))).allows("http://anything.example")
