"""The OpenAPI 3 document at ``/docs/openapi.json`` and Swagger UI at ``/docs``."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from api_support import API, Client, created, seed_session
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from scenariokit.domain.model import RunLogEntry
from scenariokit.formats.queries import all_order_by
from scenariokit.services import Services
from scenariokit_server.app import _route_table


@pytest.fixture
async def document(client: Client) -> dict[str, Any]:
    """The served OpenAPI document."""
    response = await client.get("/docs/openapi.json")
    assert response.status == 200
    data: dict[str, Any] = await response.json()
    return data


def test_document_is_valid_openapi_3(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.0")
    validate(document)


def test_every_route_is_documented_once(document: dict[str, Any]) -> None:
    # a route's path may hold a regex ({id:...}); the document names the parameter alone
    routes = {
        (method.lower(), re.sub(r"\{(\w+):[^}]+\}", r"{\1}", path)) for method, path, _ in _route_table()
    }
    documented = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert documented == routes
    operation_ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(operation_ids) == len(set(operation_ids))
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            assert op["summary"] and op["description"] and op["tags"], (method, path)
            assert "default" in op["responses"], (method, path)
            assert "produces" not in op
            names = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert names == set(re.findall(r"{(\w+)}", path)), (method, path)


def test_list_parameters_document_the_allowed_sorts(document: dict[str, Any]) -> None:
    paths = {
        "scenarios": f"{API}/scenarios",
        "environments": f"{API}/environments",
        "credentials": f"{API}/credentials",
        "snippets": f"{API}/snippets",
        "sessions": f"{API}/sessions",
        "runs": f"{API}/run",
    }
    for resource, allowed in all_order_by().items():
        params = {p["name"]: p for p in document["paths"][paths[resource]]["get"]["parameters"]}
        assert params["orderBy"]["schema"]["enum"] == list(allowed), resource
        assert params["orderDir"]["schema"]["enum"] == ["asc", "desc"]
        assert {"page", "limit"} <= set(params)
        assert ("q" in params) is (resource != "runs")
    run_params = {p["name"] for p in document["paths"][f"{API}/run"]["get"]["parameters"]}
    assert {"status", "scenarioId"} <= run_params
    log_params = {p["name"] for p in document["paths"][f"{API}/run/{{id}}"]["get"]["parameters"]}
    assert {"page", "limit", "q"} <= log_params


def test_response_schemas_mirror_the_views(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert (
        "secret" not in schemas["Credential"]["properties"]
        and "hasSecret" in schemas["Credential"]["properties"]
    )
    assert schemas["CredentialInput"]["properties"]["secret"]["writeOnly"] is True
    assert "storageState" not in schemas["Session"]["properties"]
    run = schemas["RunDetail"]["properties"]
    assert {"scenario", "environment", "session", "durationMs", "logs", "timings"} <= set(run)
    assert "timings" not in schemas["Run"]["properties"]  # lists leave the timeline to the detail
    timings = schemas["RunTimings"]["properties"]
    assert {"claimMs", "jobToWorkerMs", "browserReadyMs", "storeWritesMs", "browserCloseMs"} <= set(timings)
    assert set(schemas["StepTiming"]["properties"]) == {"stepId", "order", "durationMs"}
    assert "scenarioName" not in run and "sourceSessionId" not in run
    assert set(schemas["ScenarioPage"]["required"]) == {"items", "total", "page", "limit"}
    assert schemas["Problem"]["required"] == ["detail", "status", "title", "type"]
    assert schemas["StepInput"]["properties"]["timeoutSeconds"]["maximum"] == 3600


def _as_generators_read(node: Any) -> Any:
    """``nullable`` beside ``allOf`` read as client generators and schemathesis read it: null or the thing.

    (OAS 3.0.3 read to the letter confines ``nullable`` to a schema with a ``type``; the validator does.)
    """
    if isinstance(node, list):
        return [_as_generators_read(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _as_generators_read(value) for key, value in node.items()}
    if out.get("nullable") is True and "allOf" in out and "type" not in out:
        del out["nullable"]
        return {"anyOf": [out, {"enum": [None]}]}
    return out


def _conforms(document: dict[str, Any], schema_name: str, body: Any) -> None:
    components = _as_generators_read(document["components"])
    root = {"$ref": f"#/components/schemas/{schema_name}", "components": components}
    errors = sorted(OAS30Validator(root).iter_errors(body), key=str)
    assert not errors, f"{schema_name}: {errors[0]}"


async def test_real_responses_conform_to_their_schemas(
    client: Client, services: Services, document: dict[str, Any]
) -> None:
    environment = await created(client, f"{API}/environments", {"name": "e", "data": {"url": "http://x"}})
    credential = await created(client, f"{API}/credentials", {"name": "c", "secret": "s"})
    link = {"credentialId": credential["id"], "alias": "admin"}
    steps = [{"execCode": "pass", "timeoutSeconds": 1.5}]
    scenario = await created(
        client,
        f"{API}/scenarios",
        {"name": "s", "environmentId": environment["id"], "steps": steps, "credentials": [link]},
    )
    snippet = await created(client, f"{API}/snippets", {"alias": "a", "title": "t"})
    run = await created(
        client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    )
    await services.runs.append_logs([RunLogEntry(run_id=uuid.UUID(run["id"]), message="hello")])
    await client.post(f"{API}/run/{run['id']}/cancel")
    session = await seed_session(services)
    checks = {
        "Scenario": f"{API}/scenarios/{scenario['id']}",
        "ScenarioPage": f"{API}/scenarios",
        "Environment": f"{API}/environments/{environment['id']}",
        "EnvironmentPage": f"{API}/environments",
        "Credential": f"{API}/credentials/{credential['id']}",
        "CredentialPage": f"{API}/credentials",
        "Snippet": f"{API}/snippets/{snippet['id']}",
        "SnippetPage": f"{API}/snippets",
        "Session": f"{API}/sessions/{session.id}",
        "SessionPage": f"{API}/sessions",
        "RunDetail": f"{API}/run/{run['id']}",
        "RunPage": f"{API}/run",
        "CredentialLink": f"{API}/scenarios/{scenario['id']}/credentials/{credential['id']}",
        "Step": f"{API}/scenarios/{scenario['id']}/steps/{scenario['steps'][0]['id']}",
        "Health": "/health",
    }
    for schema_name, url in checks.items():
        response = await client.get(url)
        assert response.status == 200, url
        _conforms(document, schema_name, await response.json())
    _conforms(document, "Problem", await (await client.get(f"{API}/scenarios/x")).json())


async def test_swagger_ui_and_its_assets_are_served(client: Client) -> None:
    page = await client.get("/docs")
    assert page.status == 200 and page.content_type == "text/html"
    html = await page.text()
    assert "/docs/openapi.json" in html
    assets = re.findall(r'(?:href|src)="(/docs/static/[^"]+)"', html)
    assert {"/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css"} <= set(assets)
    for asset in assets:
        response = await client.get(asset)
        assert response.status == 200, asset
        assert len(await response.read()) > 0
