"""Save-time warnings (CONTRACT §20): a coroutine called without ``await`` is reported, not refused.

Every door that writes step code answers ``warnings`` ({scenarioId, stepId, order, line, message}):
scenario create/replace/patch, step create/replace/patch, YAML import; the OpenAPI document says so.
"""

from __future__ import annotations

from typing import Any

from api_support import API, Client, both_backends, created

YAML_HEADERS = {"Content-Type": "application/yaml"}

MISTAKES = (
    "await page.goto(helpers.getEnvUrl())\n"
    "expect(page.locator('h1')).to_have_text('WRONG TEXT')\n"
    "page.get_by_role('button').click()\n"
)
#: coroutines built on purpose, and calls of the same names that are not Playwright's: no warning
CLEAN = (
    "import asyncio\n"
    "going = page.goto(helpers.getEnvUrl())\n"
    "await going\n"
    "await asyncio.gather(page.title(), page.locator('h1').count())\n"
    "names = ['a']\n"
    "names.clear()\n"
    "names.count('a')\n"
    "task = asyncio.create_task(page.reload())\n"
    "await task\n"
)


def _messages(answer: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(w["order"], w["line"], w["message"]) for w in answer["warnings"]]


@both_backends
async def test_a_scenario_with_unawaited_calls_is_saved_and_its_answer_warns(client: Client) -> None:
    scenario = await created(
        client, f"{API}/scenarios", {"name": "s", "steps": [{"execCode": CLEAN}, {"execCode": MISTAKES}]}
    )

    assert _messages(scenario) == [
        (2, 2, "line 2: expect(page.locator('h1')).to_have_text('WRONG TEXT') is not awaited; add await"),
        (2, 3, "line 3: page.get_by_role('button').click() is not awaited; add await"),
    ]
    second = scenario["steps"][1]
    assert {w["stepId"] for w in scenario["warnings"]} == {second["id"]}
    assert {w["scenarioId"] for w in scenario["warnings"]} == {scenario["id"]}
    read = await (await client.get(f"{API}/scenarios/{scenario['id']}")).json()
    assert read["steps"][1]["execCode"] == MISTAKES  # stored as given: a warning never refuses

    patched = await client.patch(f"{API}/scenarios/{scenario['id']}", json={"name": "renamed"})
    assert patched.status == 200
    assert len((await patched.json())["warnings"]) == 2

    fixed = {"name": "s", "steps": [{"execCode": "await page.goto(helpers.getEnvUrl())"}]}
    replaced = await client.put(f"{API}/scenarios/{scenario['id']}", json=fixed)
    assert replaced.status == 200
    assert (await replaced.json())["warnings"] == []


@both_backends
async def test_step_writes_answer_the_warnings_of_their_step(client: Client) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "s"})
    path = f"{API}/scenarios/{scenario['id']}/steps"

    step = await created(client, path, {"execCode": "log('x')\npage.goto('http://127.0.0.1:1')"})
    assert step["warnings"] == [
        {
            "scenarioId": scenario["id"],
            "stepId": step["id"],
            "order": 1,
            "line": 2,
            "message": "line 2: page.goto('http://127.0.0.1:1') is not awaited; add await",
        }
    ]

    patched = await client.patch(f"{path}/{step['id']}", json={"execCode": "runSnippet('login')"})
    assert _messages(await patched.json()) == [
        (1, 1, "line 1: runSnippet('login') is not awaited; add await")
    ]

    put = await client.put(f"{path}/{step['id']}", json={"execCode": "await runSnippet('login')"})
    assert (await put.json())["warnings"] == []
    read = await (await client.get(f"{path}/{step['id']}")).json()
    assert "warnings" not in read  # a read reports the step as stored; warnings belong to a write


async def test_a_yaml_import_answers_the_warnings_of_its_scenarios(client: Client) -> None:
    text = (
        "kind: scenario\n"
        "name: imported\n"
        "steps:\n"
        "- order: 1\n"
        "  execCode: |\n"
        "    log('first')\n"
        "    page.reload()\n"
    )

    response = await client.post(f"{API}/scenarios/import", data=text, headers=YAML_HEADERS)

    assert response.status in (200, 201), await response.text()
    report = await response.json()
    (scenario_id,) = report["created"]["scenario"]
    stored = await (await client.get(f"{API}/scenarios/{scenario_id}")).json()
    assert report["warnings"] == [
        {
            "scenarioId": scenario_id,
            "stepId": stored["steps"][0]["id"],
            "order": 1,
            "line": 2,
            "message": "line 2: page.reload() is not awaited; add await",
        }
    ]


async def test_the_openapi_document_states_the_warnings_of_each_write(client: Client) -> None:
    document = await (await client.get("/docs/openapi.json")).json()
    schemas = document["components"]["schemas"]
    paths = document["paths"]

    def answer(path: str, method: str, status: str) -> str:
        content = paths[path][method]["responses"][status]["content"]["application/json"]
        ref: str = content["schema"]["$ref"]
        return ref.rsplit("/", 1)[-1]

    for path, method, status in [
        ("/api/v1/scenarios", "post", "201"),
        ("/api/v1/scenarios/{id}", "put", "200"),
        ("/api/v1/scenarios/{id}", "patch", "200"),
        ("/api/v1/scenarios/{id}/steps", "post", "201"),
        ("/api/v1/scenarios/{id}/steps/{stepId}", "patch", "200"),
        ("/api/v1/scenarios/import", "post", "200"),
    ]:
        schema = schemas[answer(path, method, status)]
        assert "warnings" in schema["required"], (path, method)
        assert "without `await`" in schema["properties"]["warnings"]["description"]
    warning = schemas["StepCodeWarning"]
    assert set(warning["properties"]) == {"scenarioId", "stepId", "order", "line", "message"}
