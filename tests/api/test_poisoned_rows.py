"""Nothing a request stores can make a later read or list fail (docs/rest.md, "JSON bodies").

Every create and update route, REST and the MCP tools that write, gets edge values: nesting at the
limit and past it, the largest and smallest numbers, long strings, unicode, empty objects. Whatever each
answers (stored or refused, never a fault), every list and every read afterwards answers 200.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from api_support import API, Client, both_backends, created, seed_session

from scenariokit.domain.json_values import MAX_DEPTH
from scenariokit.services import Services

JSON_HEADERS = {"Content-Type": "application/json"}
YAML_HEADERS = {"Content-Type": "application/yaml"}


def nested(depth: int) -> Any:
    """An object ``depth`` levels deep (1 is ``{}``)."""
    value: Any = {}
    for index in range(depth - 1):
        value = {"k": value} if index % 2 else {"l": [value]} if depth - index > 2 else {"k": value}
    return value


EDGE_STRINGS = [
    "",
    " ",
    "x" * 100_000,
    "héllo ☃ 😀 \u202eevil\u202c 한국어 عربى",
    "line\u2028sep\u2029para\r\n\t",
    "'; DROP TABLE scenarios; --",
    "\\u0000 is text, not NUL",
    "\ufeffbom",
    "a\u0301" * 100,
]
EDGE_NUMBERS: list[Any] = [
    0,
    -1,
    5e-324,
    1,
    3600,
    3600.000001,
    2**63 - 1,
    -(2**63),
    1.7976931348623157e308,
    True,
]
EDGE_DATA: list[Any] = [
    {},
    {"": None},
    nested(MAX_DEPTH - 1),  # inside a body: the body is MAX_DEPTH deep, the limit
    nested(MAX_DEPTH),  # one more: refused
    {"max": 2**63 - 1, "min": -(2**63), "big": 1.7976931348623157e308, "tiny": 5e-324, "negzero": -0.0},
    {"😀": ["ü" * 1000], "url": "http://127.0.0.1:9/ä?q=%00"},
    {"list": [[[[[]]]]], "many": list(range(10_000))},
]
#: Raw bodies no JSON library would produce: each must be refused with 400.
RAW_BODIES = [
    '{"name": "n", "data": {"x": NaN}}',
    '{"name": "n", "data": {"x": -Infinity}}',
    '{"name": "n", "data": {"x": 1e999}}',
    '{"name": "n", "data": {"x": ' + "9" * 5000 + "}}",
    '{"name": "n", "data": {"x": 9223372036854775808}}',
    '{"name": "n", "data": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}",
    '{"name": "n", "data": ' + "[" * 100_000 + "]" * 100_000 + "}",
]


def variants(base: dict[str, Any], fields: dict[str, list[Any]]) -> Iterator[dict[str, Any]]:
    """``base`` with one field at a time set to each of its edge values."""
    yield base
    for field, values in fields.items():
        for value in values:
            yield {**base, field: value}


async def send(client: Client, method: str, path: str, body: Any) -> int:
    """Send a JSON body; the answer must be a success or a refusal, never a fault."""
    data = body if isinstance(body, str) else json.dumps(body)
    response = await client.request(method, path, data=data, headers=JSON_HEADERS)
    assert response.status < 500, (method, path, await response.text())
    return response.status


async def call_tool(client: Client, name: str, arguments: dict[str, Any]) -> None:
    """Call an MCP tool with a raw JSON-RPC request through the same app; a fault fails the test."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    headers = {
        **JSON_HEADERS,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    response = await client.post("/mcp", data=json.dumps(request), headers=headers)
    text = await response.text()
    assert response.status == 200, text
    result = json.loads(text)["result"]
    if result.get("isError"):
        assert result["structuredContent"]["status"] < 500, text


async def seed(client: Client, services: Services) -> dict[str, str]:
    environment = await created(client, f"{API}/environments", {"name": "env", "data": {"url": "http://x"}})
    credential = await created(client, f"{API}/credentials", {"name": "cred", "username": "u", "secret": "s"})
    snippet = await created(client, f"{API}/snippets", {"alias": "snip", "title": "t", "code": "return 1"})
    scenario = await created(
        client, f"{API}/scenarios", {"name": "sc", "steps": [{"execCode": "pass"}, {"execCode": "pass"}]}
    )
    run = await created(
        client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    )
    session = await seed_session(services)
    return {
        "environment": environment["id"],
        "credential": credential["id"],
        "snippet": snippet["id"],
        "scenario": scenario["id"],
        "step": scenario["steps"][0]["id"],
        "step2": scenario["steps"][1]["id"],
        "run": run["id"],
        "session": str(session.id),
    }


async def every_read_answers(client: Client) -> None:
    """List every resource, read every item and export it: all 200."""
    lists = ("scenarios", "environments", "credentials", "snippets", "sessions", "run")
    for resource in lists:
        for order_dir in ("asc", "desc"):
            response = await client.get(f"{API}/{resource}?limit=200&orderDir={order_dir}")
            assert response.status == 200, (resource, await response.text())
            page = await response.json()
            json.dumps(page, allow_nan=False)  # strict JSON, no NaN sneaked through
        for item in page["items"]:
            detail = await client.get(f"{API}/{resource}/{item['id']}")
            assert detail.status == 200, (resource, await detail.text())
            if resource in ("environments", "credentials", "snippets"):
                export = await client.get(f"{API}/{resource}/{item['id']}/export")
                assert export.status == 200, (resource, await export.text())
            if resource == "scenarios":
                for sub in ("steps", "credentials", "runs", "export"):
                    response = await client.get(f"{API}/scenarios/{item['id']}/{sub}")
                    assert response.status == 200, (sub, await response.text())
    export = await client.get(f"{API}/scenarios/export?includeEnvironment=true")
    assert export.status == 200, await export.text()


@both_backends
async def test_no_stored_value_breaks_a_later_read(client: Client, services: Services) -> None:
    ids = await seed(client, services)
    strings = dict.fromkeys(("name", "description"), EDGE_STRINGS)
    environment = {"name": "e", "data": {}}
    for method, path in (("POST", "environments"), ("PUT", f"environments/{ids['environment']}")):
        for body in variants(environment, {**strings, "data": EDGE_DATA}):
            await send(client, method, f"{API}/{path}", body)
    for body in variants({}, {**strings, "data": EDGE_DATA}):
        await send(client, "PATCH", f"{API}/environments/{ids['environment']}", body)
    for raw in RAW_BODIES:
        for method, path in (("POST", "environments"), ("PATCH", f"environments/{ids['environment']}")):
            assert await send(client, method, f"{API}/{path}", raw) == 400, raw[:60]

    credential = {"name": "c", "username": "u", "secret": "s"}
    credential_fields = {**strings, "username": EDGE_STRINGS, "secret": EDGE_STRINGS}
    for method, path in (("POST", "credentials"), ("PUT", f"credentials/{ids['credential']}")):
        for body in variants(credential, credential_fields):
            await send(client, method, f"{API}/{path}", body)

    snippet_fields = {"alias": EDGE_STRINGS, "title": EDGE_STRINGS, "description": EDGE_STRINGS}
    snippet_fields["code"] = EDGE_STRINGS
    for index, body in enumerate(variants({"title": "t", "code": "return 1"}, snippet_fields)):
        await send(client, "POST", f"{API}/snippets", {"alias": f"a{index}", **body})
        await send(client, "PATCH", f"{API}/snippets/{ids['snippet']}", body)

    numbers = {"timeoutSeconds": EDGE_NUMBERS}
    step_fields = {"execCode": EDGE_STRINGS, "title": EDGE_STRINGS, "order": EDGE_NUMBERS, **numbers}
    scenario_fields = {
        **strings,
        **numbers,
        "steps": [[], [{"execCode": "pass", "title": s} for s in EDGE_STRINGS]],
    }
    for method, path in (("POST", "scenarios"), ("PUT", f"scenarios/{ids['scenario']}")):
        for body in variants({"name": "s"}, scenario_fields):
            await send(client, method, f"{API}/{path}", body)
    scenario = f"{API}/scenarios/{ids['scenario']}"
    for body in variants({"execCode": "pass"}, step_fields):
        await send(client, "POST", f"{scenario}/steps", body)
        await send(client, "PATCH", f"{scenario}/steps/{ids['step']}", body)
    steps = await (await client.get(f"{scenario}/steps")).json()
    await send(
        client, "PUT", f"{scenario}/steps/order", {"stepIds": [step["id"] for step in reversed(steps)]}
    )
    for alias in EDGE_STRINGS:
        await send(
            client, "POST", f"{scenario}/credentials", {"credentialId": ids["credential"], "alias": alias}
        )
    for flag in (True, False, 0, "yes", None):
        run = {"scenario": {"id": ids["scenario"]}, "environmentId": ids["environment"], "saveSession": flag}
        await send(client, "POST", f"{API}/run", run)

    for index, data in enumerate(EDGE_DATA):
        for kind, extra in (
            ("environment", {"data": data}),
            ("snippet", {"title": "t", "alias": f"y{index}"}),
        ):
            document = json.dumps({"kind": kind, "name": f"imported-{index}", **extra})
            response = await client.post(f"{API}/{kind}s/import", data=document, headers=YAML_HEADERS)
            assert response.status < 500, await response.text()
    for text in (
        "name: big\ndata:\n  n: " + "9" * 5000,
        "name: nan\ndata:\n  n: .nan",
        "name: inf\ndata: {n: -.inf}",
    ):
        response = await client.post(f"{API}/environments/import", data=text, headers=YAML_HEADERS)
        assert response.status == 400, await response.text()

    for data in EDGE_DATA:
        await call_tool(client, "create_environment", {"name": "mcp", "data": data})
        await call_tool(client, "update_environment", {"environmentId": ids["environment"], "data": data})
    for value in EDGE_STRINGS + EDGE_NUMBERS:
        await call_tool(
            client, "create_scenario", {"name": "mcp", "description": value, "timeoutSeconds": value}
        )
        await call_tool(client, "update_scenario", {"scenarioId": ids["scenario"], "name": value})
        await call_tool(
            client, "create_step", {"scenarioId": ids["scenario"], "execCode": "pass", "title": value}
        )
        await call_tool(
            client,
            "update_step",
            {"scenarioId": ids["scenario"], "stepId": ids["step2"], "timeoutSeconds": value},
        )
    await call_tool(
        client, "run_scenario", {"scenarioId": ids["scenario"], "environmentId": ids["environment"]}
    )

    await every_read_answers(client)
