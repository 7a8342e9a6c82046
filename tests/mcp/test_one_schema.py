"""One schema source: a tool's body parameters are the OpenAPI schema of the same attrs input, and its
answer's ``outputSchema`` is the OpenAPI schema of the REST answer it gives.

Read from the running server, as clients see them: ``/docs/openapi.json`` and the MCP ``tools/list``.
Bad input, over REST and over MCP alike, is refused naming the field, and nothing is stored.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from jsonschema import Draft202012Validator
from mcp_support import Served, call, connect, fail

from scenariokit.formats import inputs
from scenariokit_server import schemas
from scenariokit_server.mcp import TOOL_HINTS, TOOL_OUTPUTS
from scenariokit_server.mcp_tools import ScenarioKitTools, ToolInput, ToolQuery

#: The words that bound a value; a tool must say each exactly as OpenAPI does.
BOUNDS = ("type", "format", "minLength", "maxLength", "pattern", "maximum", "minimum", "enum", "items")
#: Request components of the OpenAPI document, by input class (RunInput's REST body adds an alias).
COMPONENTS = {
    inputs.ScenarioInput: "ScenarioInput",
    inputs.StepInput: "StepInput",
    inputs.EnvironmentInput: "EnvironmentInput",
    inputs.RunInput: "RunInput",
    inputs.ScheduleInput: "ScheduleInput",
    inputs.AuthoringStartInput: "AuthoringStartInput",
    inputs.AuthoringExecInput: "AuthoringExecInput",
    inputs.AuthoringSaveInput: "AuthoringSaveInput",
}


#: The REST operation whose query parameters a list tool takes.
LIST_OPERATIONS = {
    "list_scenarios": "/api/v1/scenarios",
    "list_environments": "/api/v1/environments",
    "get_run": "/api/v1/run/{id}",
    "list_schedules": "/api/v1/schedules",
    "list_revisions": "/api/v1/scenarios/{id}/revisions",
    "list_runs": "/api/v1/run",
    "get_scenario_stats": "/api/v1/scenarios/{id}/stats",
    "list_snippets": "/api/v1/snippets",
    "list_credentials": "/api/v1/credentials",
    "list_sessions": "/api/v1/sessions",
}


def _marked(kind: type) -> dict[str, Any]:
    """Every tool whose arguments are declared by a ``kind`` mark (read off the tools themselves)."""
    found = {}
    for name in dir(ScenarioKitTools):
        spec = getattr(getattr(ScenarioKitTools, name), "tool_arguments", None)
        if isinstance(spec, kind):
            found[name] = spec
    return found


def _tool_inputs() -> dict[str, ToolInput]:
    return _marked(ToolInput)


def _resolved(node: Any, components: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return _resolved(components[node["$ref"].rsplit("/", 1)[-1]], components)
        return {key: _resolved(value, components) for key, value in node.items()}
    if isinstance(node, list):
        return [_resolved(item, components) for item in node]
    return node


def _as_json_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI 3.0 property said the JSON Schema way (as MCP does): nullable, exclusiveMinimum."""
    out = dict(prop)
    if len(out.get("allOf", ())) == 1:  # a nested object (a scenario's retries), said in place
        (inner,) = out.pop("allOf")
        out = {**inner, **out}
    if out.pop("exclusiveMinimum", False) is True:
        out["exclusiveMinimum"] = out.pop("minimum")
    if out.pop("nullable", False):
        out["type"] = [out["type"], "null"]
    if "items" in out and "properties" in out["items"]:  # a list of objects (a list of numbers has none)
        items = dict(out["items"])
        items["properties"] = {k: _as_json_schema(v) for k, v in items["properties"].items()}
        out["items"] = items
    return out


async def _documents(server: Served) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    async with aiohttp.ClientSession() as http, http.get(f"{server.url}/docs/openapi.json") as response:
        openapi = await response.json()
    async with connect(server.mcp_url) as mcp:
        tools = {tool.name: tool.input_schema for tool in (await mcp.list_tools()).tools}
    return openapi, tools


def test_every_tool_that_takes_a_body_is_compared() -> None:
    assert set(_tool_inputs()) == {
        "create_scenario",
        "update_scenario",
        "create_step",
        "update_step",
        "create_environment",
        "update_environment",
        "run_scenario",
        "create_schedule",
        "update_schedule",
        "authoring_start",
        "authoring_exec",
        "authoring_save",
    }


async def test_a_list_tool_takes_the_query_parameters_rest_documents(server: Served) -> None:
    assert set(_marked(ToolQuery)) == set(LIST_OPERATIONS)
    openapi, tools = await _documents(server)
    for name, path in LIST_OPERATIONS.items():
        documented = {p["name"]: p for p in openapi["paths"][path]["get"]["parameters"] if p["in"] == "query"}
        offered = tools[name]["properties"]
        assert set(documented) <= set(offered), name
        for param, spec in documented.items():
            for word in (*BOUNDS, "default"):
                assert offered[param].get(word) == spec["schema"].get(word), f"{name}.{param}: {word}"
            assert offered[param]["description"] == spec["description"], f"{name}.{param}"
    limit = tools["get_run"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)


async def test_openapi_marks_environment_id_required_on_the_run_input(server: Served) -> None:
    openapi, _ = await _documents(server)
    run_input = openapi["components"]["schemas"]["RunInput"]
    assert "environmentId" in run_input["required"]
    assert run_input["properties"]["environmentId"]["format"] == "uuid"
    assert "nullable" not in run_input["properties"]["environmentId"]


async def test_a_tool_states_the_bounds_required_fields_and_descriptions_openapi_states(
    server: Served,
) -> None:
    openapi, tools = await _documents(server)
    components = openapi["components"]["schemas"]
    for name, spec in _tool_inputs().items():
        component = _resolved(components[COMPONENTS[spec.cls]], components)
        schema = tools[name]
        for field in spec.fields:
            documented = _as_json_schema(component["properties"][field])
            offered = schema["properties"][field]
            for word in BOUNDS:
                assert offered.get(word) == documented.get(word), f"{name}.{field}: {word}"
            if (spec.cls, field) == (inputs.RunInput, "scenarioId"):  # REST adds when it may be left out
                assert documented["description"].startswith(offered["description"]), field
            else:
                assert offered["description"] == documented["description"], f"{name}.{field}"
        body_required = set(schema.get("required", ())) & set(spec.fields)
        if spec.patch:
            assert body_required == set(), name  # an update names only what it changes
        elif spec.cls is inputs.RunInput:
            # REST also takes the run's `scenario` alias, so there scenarioId is required unless it is given.
            assert set(component["required"]) == {"environmentId"}
            # run_scenario takes environmentIds (a batch, docs/monitoring.md) instead of environmentId.
            assert body_required == {"scenarioId"}
            batch = _resolved(components["RunBatchInput"], components)["properties"]["environmentIds"]
            for word in BOUNDS:
                assert schema["properties"]["environmentIds"].get(word) == batch.get(word), word
            assert "Required unless `scenario`" in component["properties"]["scenarioId"]["description"]
        else:
            assert body_required == set(component.get("required", ())) & set(spec.fields), name
    name_bounds = tools["create_scenario"]["properties"]["name"]
    assert (name_bounds["minLength"], name_bounds["maxLength"]) == (1, 200)


async def test_bad_input_is_refused_by_field_over_rest_and_mcp_and_nothing_is_stored(server: Served) -> None:
    too_long = "n" * 201
    async with aiohttp.ClientSession() as http:
        api = f"{server.url}/api/v1"
        async with http.post(f"{api}/scenarios", json={"name": too_long}) as response:
            assert response.status == 400
            assert set((await response.json())["errors"]) == {"name"}
        async with http.post(
            f"{api}/environments", json={"name": "env", "data": {"url": "http://127.0.0.1:9"}}
        ) as r:
            assert r.status == 201
        async with http.post(f"{api}/scenarios", json={"name": "kept", "timeoutSeconds": 60}) as r:
            scenario = await r.json()
        patch = {"timeoutSeconds": -1, "description": "not written"}
        async with http.patch(f"{api}/scenarios/{scenario['id']}", json=patch) as response:
            assert response.status == 400
            assert (await response.json())["errors"] == {
                "timeoutSeconds": "must be greater than 0 and at most 3600"
            }
        async with http.post(f"{api}/run", json={"scenarioId": scenario["id"]}) as response:
            assert response.status == 400
            why = "give environmentId (one run) or environmentIds (a batch)"
            assert (await response.json())["errors"] == {"environmentId": why, "environmentIds": why}

    async with connect(server.mcp_url) as mcp:
        refused = await fail(mcp, "create_scenario", name=too_long)
        assert set(refused.structured_content["errors"]) == {"name"}
        refused = await fail(
            mcp, "update_scenario", scenarioId=scenario["id"], timeoutSeconds=0, name="changed"
        )
        assert set(refused.structured_content["errors"]) == {"timeoutSeconds"}
        refused = await fail(
            mcp, "create_step", scenarioId=scenario["id"], execCode="pass", timeoutSeconds="soon"
        )
        assert refused.structured_content["errors"] == {"timeoutSeconds": "must be a number"}
        refused = await fail(mcp, "run_scenario", scenarioId=scenario["id"], environmentId="not-a-uuid")
        assert refused.structured_content["errors"] == {"environmentId": "'not-a-uuid' is not a UUID"}
        stored = await call(mcp, "get_scenario", scenarioId=scenario["id"])
        assert (stored["name"], stored["description"], stored["timeoutSeconds"], stored["steps"]) == (
            "kept",
            None,
            60,
            [],
        )
        assert (await call(mcp, "list_scenarios"))["total"] == 1
    assert (await server.services.runs.list()).total == 0
    assert (await server.services.environments.list()).total == 1


#: The REST answer each tool's answer is: (method, path, status) of the route in the OpenAPI document.
#: The tools left out answer what REST answers with 204 or YAML (MCP_ONLY_OUTPUTS).
OUTPUT_ROUTES = {
    "list_scenarios": ("get", "/api/v1/scenarios", "200"),
    "get_scenario": ("get", "/api/v1/scenarios/{id}", "200"),
    "create_scenario": ("post", "/api/v1/scenarios", "201"),
    "update_scenario": ("patch", "/api/v1/scenarios/{id}", "200"),
    "create_step": ("post", "/api/v1/scenarios/{id}/steps", "201"),
    "update_step": ("patch", "/api/v1/scenarios/{id}/steps/{stepId}", "200"),
    "list_environments": ("get", "/api/v1/environments", "200"),
    "create_environment": ("post", "/api/v1/environments", "201"),
    "update_environment": ("patch", "/api/v1/environments/{id}", "200"),
    "run_scenario": ("post", "/api/v1/run", "201"),
    "get_run": ("get", "/api/v1/run/{id}", "200"),
    "list_schedules": ("get", "/api/v1/schedules", "200"),
    "create_schedule": ("post", "/api/v1/schedules", "201"),
    "update_schedule": ("patch", "/api/v1/schedules/{id}", "200"),
    "authoring_start": ("post", "/api/v1/authoring", "201"),
    "authoring_exec": ("post", "/api/v1/authoring/{id}/exec", "200"),
    "authoring_snapshot": ("get", "/api/v1/authoring/{id}", "200"),
    "authoring_save": ("post", "/api/v1/authoring/{id}/save", "200"),
    "list_runs": ("get", "/api/v1/run", "200"),
    "cancel_run": ("post", "/api/v1/run/{id}/cancel", "200"),
    "get_scenario_stats": ("get", "/api/v1/scenarios/{id}/stats", "200"),
    "list_snippets": ("get", "/api/v1/snippets", "200"),
    "get_snippet": ("get", "/api/v1/snippets/{id}", "200"),
    "list_credentials": ("get", "/api/v1/credentials", "200"),
    "list_sessions": ("get", "/api/v1/sessions", "200"),
    "import_yaml": ("post", "/api/v1/environments/import", "200"),
    "get_health": ("get", "/health", "200"),
    "list_revisions": ("get", "/api/v1/scenarios/{id}/revisions", "200"),
    "diff_revisions": ("get", "/api/v1/scenarios/{id}/revisions/{from}/diff/{to}", "200"),
    "restore_revision": ("post", "/api/v1/scenarios/{id}/revisions/{number}/restore", "200"),
}
MCP_ONLY_OUTPUTS = {
    "delete_scenario": schemas.Deleted,
    "delete_step": schemas.Deleted,
    "delete_schedule": schemas.Deleted,
    "delete_environment": schemas.Deleted,
    "authoring_end": schemas.AuthoringEnded,
    "export_yaml": schemas.YamlExport,
}


def _fields(node: Any, where: str = "$") -> set[str]:
    """Every property path a schema names (through items and alternatives), each marked when required."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= _fields(item, where)
        return found
    if not isinstance(node, dict):
        return found
    required = set(node.get("required", ()))
    for name, prop in node.get("properties", {}).items():
        path = f"{where}.{name}"
        found.add(path + ("!" if name in required else ""))
        found |= _fields(prop, path)
    for word in ("items", "anyOf", "oneOf", "allOf"):
        if word in node:
            found |= _fields(node[word], where + ("[]" if word == "items" else ""))
    return found


async def test_every_tool_lists_the_output_schema_of_the_rest_answer_it_gives(server: Served) -> None:
    assert set(TOOL_OUTPUTS) == set(TOOL_HINTS) == set(OUTPUT_ROUTES) | set(MCP_ONLY_OUTPUTS)
    async with aiohttp.ClientSession() as http, http.get(f"{server.url}/docs/openapi.json") as response:
        openapi = await response.json()
    components = openapi["components"]["schemas"]
    async with connect(server.mcp_url) as mcp:
        listed = {tool.name: tool.output_schema for tool in (await mcp.list_tools()).tools}
    for name, schema in listed.items():
        assert schema is not None and schema["type"] == "object", name
        Draft202012Validator.check_schema(schema)
        if name in MCP_ONLY_OUTPUTS:
            assert schema == schemas.output_schema_of(MCP_ONLY_OUTPUTS[name]), name
            continue
        method, path, status = OUTPUT_ROUTES[name]
        documented = openapi["paths"][path][method]["responses"][status]["content"]["application/json"]
        rest = _resolved(documented["schema"], components)
        assert _fields(schema) and _fields(schema) == _fields(rest), name
    run = listed["get_run"]["properties"]
    assert run["status"]["enum"] == ["in_progress", "pass", "fail"]
    assert run["error"]["type"] == ["object", "null"]  # a nullable object: null or the whole object
    assert set(run["error"]["required"]) == {"kind", "message", "stepId"}
