"""Bearer tokens on ``/api/v1`` and ``/mcp``; CORS preflight on every route."""

from __future__ import annotations

import pytest
from aiohttp import web
from api_support import API, Client, ClientFactory, problem_of
from openapi_spec_validator import validate

from scenariokit_server.app import check_bind, is_loopback
from scenariokit_server.settings import Settings, UnsafeBindError

TOKENS = ("first-token-0123456789", "second-token-0123456789")


@pytest.fixture
async def secured(make_client: ClientFactory) -> Client:
    """A client of an app that requires one of :data:`TOKENS`."""
    return await make_client(api_tokens=TOKENS, cors_origins=("http://ui.example",))


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong",
        "Basic Zmlyc3QtdG9rZW4tMDEyMzQ1Njc4OQ==",
        "first-token-0123456789",
        "Bearer first-token-01234567892",
    ],
)
async def test_api_needs_a_valid_bearer_token(secured: Client, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = await secured.get(f"{API}/scenarios", headers=headers)
    await problem_of(response, 401)
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="scenariokit"'


@pytest.mark.parametrize("token", TOKENS)
async def test_each_configured_token_is_accepted(secured: Client, token: str) -> None:
    response = await secured.get(f"{API}/scenarios", headers={"Authorization": f"Bearer {token}"})
    assert response.status == 200
    response = await secured.get(f"{API}/scenarios", headers={"Authorization": f"bearer {token}"})
    assert response.status == 200


async def test_unauthenticated_requests_learn_nothing_about_routes(secured: Client) -> None:
    await problem_of(await secured.get(f"{API}/no-such-thing"), 401)
    await problem_of(await secured.delete(f"{API}/scenarios"), 401)
    await problem_of(await secured.post("/mcp", json={}), 401)
    await problem_of(await secured.get("/mcp/anything"), 401)
    authorized = await secured.post("/mcp", json={}, headers={"Authorization": f"Bearer {TOKENS[0]}"})
    assert authorized.status == 400  # past auth: the MCP endpoint itself refuses a body that is not JSON-RPC


async def test_health_and_docs_stay_open(secured: Client) -> None:
    assert (await secured.get("/health")).status == 200
    assert (await secured.get("/docs")).status == 200
    document = await secured.get("/docs/openapi.json")
    assert document.status == 200
    spec = await document.json()
    assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert spec["paths"]["/api/v1/scenarios"]["get"]["security"] == [{"bearerAuth": []}]
    assert "security" not in spec["paths"]["/health"]["get"]
    validate(spec)
    assert (await secured.get("/docs/static/swagger-ui-bundle.js")).status == 200


async def test_preflight_is_not_blocked_by_auth(secured: Client) -> None:
    response = await secured.options(
        f"{API}/scenarios",
        headers={
            "Origin": "http://ui.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "Authorization, Content-Type",
        },
    )
    assert response.status == 200
    assert response.headers["Access-Control-Allow-Origin"] == "http://ui.example"


async def test_without_tokens_the_api_is_open(client: Client) -> None:
    assert (await client.get(f"{API}/scenarios")).status == 200


def _preflights(app: web.Application) -> list[tuple[str, str]]:
    seen = set()
    for route in app.router.routes():
        if route.method in ("OPTIONS", "HEAD") or isinstance(route.resource, web.StaticResource):
            continue
        assert route.resource is not None
        info = route.resource.get_info()
        path = info.get("path") or info["formatter"]
        names = {"id": "x", "stepId": "y", "credentialId": "z", "name": "n", "number": "1"}
        names |= {"from": "1", "to": "2"}
        seen.add((route.method, path.format(**names)))
    return sorted(seen)


async def test_preflight_works_for_every_route_and_method(make_client: ClientFactory) -> None:
    client = await make_client(cors_origins=("http://ui.example", "http://other.example"))
    routes = _preflights(client.app)
    assert len(routes) > 50
    for method, path in routes:
        response = await client.options(
            path,
            headers={
                "Origin": "http://other.example",
                "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert response.status == 200, (method, path)
        assert response.headers["Access-Control-Allow-Origin"] == "http://other.example"
        assert method in response.headers["Access-Control-Allow-Methods"]
        allowed = {h.strip().lower() for h in response.headers["Access-Control-Allow-Headers"].split(",")}
        assert allowed == {"authorization", "content-type"}


async def test_cross_origin_create_exposes_location(make_client: ClientFactory) -> None:
    client = await make_client(cors_origins=("*",))
    response = await client.post(
        f"{API}/scenarios", json={"name": "x"}, headers={"Origin": "http://any.example"}
    )
    assert response.status == 201
    assert response.headers["Access-Control-Allow-Origin"] in ("*", "http://any.example")
    assert "Location" in response.headers["Access-Control-Expose-Headers"]
    error = await client.get(f"{API}/scenarios/nope", headers={"Origin": "http://any.example"})
    await problem_of(error, 400)
    assert "Access-Control-Allow-Origin" in error.headers  # a frontend can read error bodies too


async def test_unlisted_origin_gets_no_cors(make_client: ClientFactory) -> None:
    client = await make_client(cors_origins=("http://ui.example",))
    response = await client.options(
        f"{API}/scenarios", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"}
    )
    await problem_of(response, 403)
    assert "Access-Control-Allow-Origin" not in response.headers
    plain = await client.get(f"{API}/scenarios", headers={"Origin": "http://evil.example"})
    assert plain.status == 200 and "Access-Control-Allow-Origin" not in plain.headers


async def test_without_origins_there_is_no_cors(client: Client) -> None:
    response = await client.get(f"{API}/scenarios", headers={"Origin": "http://ui.example"})
    assert "Access-Control-Allow-Origin" not in response.headers


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("0.0.0.0", False), ("", False), ("192.168.1.10", False), ("example.com", False)],
)  # fmt: skip
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_non_loopback_bind_needs_tokens_or_insecure() -> None:
    with pytest.raises(UnsafeBindError, match="SCENARIOKIT_API_TOKENS"):
        check_bind(Settings(host="0.0.0.0"))
    check_bind(Settings(host="0.0.0.0", api_tokens=TOKENS))
    check_bind(Settings(host="0.0.0.0", insecure=True, allowed_hosts=("scenariokit.internal",)))
    check_bind(Settings())
