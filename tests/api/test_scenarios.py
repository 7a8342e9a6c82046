"""Scenarios, their steps and their credential links through ``/api/v1/scenarios``."""

from __future__ import annotations

import uuid

from api_support import API, Client, both_backends, created, problem_of


async def _scenario(client: Client, **fields: object) -> dict:
    return await created(client, f"{API}/scenarios", {"name": "checkout", **fields})


@both_backends
async def test_scenario_crud_round_trip(client: Client) -> None:
    environment = await created(
        client, f"{API}/environments", {"name": "staging", "data": {"url": "http://x"}}
    )
    scenario = await _scenario(
        client,
        description="buy *one* thing",
        environmentId=environment["id"],
        timeoutSeconds=120,
        steps=[{"execCode": "await page.goto(helpers.getEnvUrl())", "title": "open"}, {"execCode": "pass"}],
    )
    assert scenario["environmentId"] == environment["id"]
    assert [s["order"] for s in scenario["steps"]] == [1, 2]
    assert set(scenario) == {
        *("id", "name", "description", "environmentId", "timeoutSeconds"),
        *("credentials", "steps", "createdAt", "updatedAt", "retries", "browser", "warnings"),
    }
    assert scenario["browser"] == {}  # no settings: Playwright's default context
    assert scenario["retries"] == {"count": 0, "backoff": "fixed", "backoffSeconds": 0.0}
    assert scenario.pop("warnings") == []  # a write's answer: the scenario and its step code's warnings

    read = await (await client.get(f"{API}/scenarios/{scenario['id']}")).json()
    assert read == scenario

    patched = await client.patch(f"{API}/scenarios/{scenario['id']}", json={"name": "checkout v2"})
    assert patched.status == 200
    body = await patched.json()
    assert (
        body["name"] == "checkout v2" and body["description"] == "buy *one* thing" and len(body["steps"]) == 2
    )

    put = await client.put(f"{API}/scenarios/{scenario['id']}", json={"name": "replaced"})
    assert put.status == 200
    body = await put.json()
    assert body["description"] is None and body["environmentId"] is None and len(body["steps"]) == 2

    deleted = await client.delete(f"{API}/scenarios/{scenario['id']}")
    assert deleted.status == 204 and await deleted.read() == b""
    await problem_of(await client.get(f"{API}/scenarios/{scenario['id']}"), 404)


async def test_validation_failures_name_each_field(client: Client) -> None:
    response = await client.post(
        f"{API}/scenarios",
        json={"name": 5, "timeoutSeconds": "soon", "environmentId": "nope", "bogus": 1},
    )
    problem = await problem_of(response, 400)
    assert problem["errors"] == {
        "name": "must be a string",
        "timeoutSeconds": "must be a number",
        "environmentId": "'nope' is not a UUID",
        "bogus": "unknown field",
    }
    problem = await problem_of(await client.post(f"{API}/scenarios", json={"steps": [{"title": "x"}]}), 400)
    assert "steps[0].execCode" in problem["errors"]


async def test_blank_name_is_refused(client: Client) -> None:
    problem = await problem_of(await client.post(f"{API}/scenarios", json={"name": "  "}), 400)
    assert problem["errors"] == {"name": "is required and must not be blank"}


async def test_timeout_above_an_hour_is_refused(client: Client) -> None:
    problem = await problem_of(
        await client.post(f"{API}/scenarios", json={"name": "x", "timeoutSeconds": 3601}), 400
    )
    assert "timeoutSeconds" in problem["errors"]


async def test_reference_to_a_missing_environment_is_a_400(client: Client) -> None:
    missing = str(uuid.uuid4())
    problem = await problem_of(
        await client.post(f"{API}/scenarios", json={"name": "x", "environmentId": missing}), 400
    )
    assert "environmentId" in problem["errors"]


async def test_non_uuid_ids_give_400_naming_the_segment(client: Client) -> None:
    scenario = await _scenario(client)
    problem = await problem_of(await client.get(f"{API}/scenarios/not-a-uuid"), 400)
    assert problem["errors"] == {"id": "'not-a-uuid' is not a UUID"}
    problem = await problem_of(await client.get(f"{API}/scenarios/{scenario['id']}/steps/nope"), 400)
    assert "stepId" in problem["errors"]
    problem = await problem_of(await client.delete(f"{API}/scenarios/{scenario['id']}/credentials/nope"), 400)
    assert "credentialId" in problem["errors"]


async def test_missing_scenario_gives_404_on_every_method(client: Client) -> None:
    url = f"{API}/scenarios/{uuid.uuid4()}"
    await problem_of(await client.get(url), 404)
    await problem_of(await client.patch(url, json={"name": "x"}), 404)
    await problem_of(await client.put(url, json={"name": "x"}), 404)
    await problem_of(await client.delete(url), 404)
    await problem_of(await client.get(f"{url}/steps"), 404)
    await problem_of(await client.get(f"{url}/runs"), 404)


@both_backends
async def test_steps_crud_and_reorder(client: Client) -> None:
    scenario = await _scenario(client)
    base = f"{API}/scenarios/{scenario['id']}/steps"
    first = await created(client, base, {"execCode": "log('a')", "title": "a"})
    second = await created(client, base, {"execCode": "log('b')", "title": "b", "timeoutSeconds": 5})
    inserted = await created(client, base, {"execCode": "log('c')", "title": "c", "order": 1})
    listed = await (await client.get(base)).json()
    assert [s["title"] for s in listed] == ["c", "a", "b"]
    assert [s["order"] for s in listed] == [1, 2, 3]

    one = await (await client.get(f"{base}/{second['id']}")).json()
    assert one["timeoutSeconds"] == 5

    patched = await (await client.patch(f"{base}/{first['id']}", json={"title": "A"})).json()
    assert patched["title"] == "A" and patched["execCode"] == "log('a')"

    put = await client.put(f"{base}/{first['id']}", json={"execCode": "log('A')", "order": 3})
    assert put.status == 200 and (await put.json())["order"] == 3

    order = [second["id"], first["id"], inserted["id"]]
    reordered = await client.put(f"{base}/order", json={"stepIds": order})
    assert reordered.status == 200
    assert [s["id"] for s in await reordered.json()] == order
    assert [s["order"] for s in await reordered.json()] == [1, 2, 3]

    problem = await problem_of(await client.put(f"{base}/order", json={"stepIds": order[:2]}), 400)
    assert "stepIds" in problem["errors"]

    deleted = await client.delete(f"{base}/{second['id']}")
    assert deleted.status == 204 and await deleted.read() == b""
    assert [s["order"] for s in await (await client.get(base)).json()] == [1, 2]
    await problem_of(await client.get(f"{base}/{second['id']}"), 404)


async def test_step_without_code_is_refused(client: Client) -> None:
    scenario = await _scenario(client)
    problem = await problem_of(
        await client.post(f"{API}/scenarios/{scenario['id']}/steps", json={"title": "x"}), 400
    )
    assert problem["errors"] == {"execCode": "is required"}


async def test_code_that_does_not_compile_is_refused_and_the_stored_step_is_unchanged(client: Client) -> None:
    scenario = await _scenario(client, steps=[{"execCode": "await page.goto(helpers.getEnvUrl())"}])
    step_url = f"{API}/scenarios/{scenario['id']}/steps/{scenario['steps'][0]['id']}"

    problem = await problem_of(await client.patch(step_url, json={"execCode": "await page.goto(\n"}), 400)
    assert problem["errors"] == {"execCode": "is not valid Python: '(' was never closed (line 1)"}
    assert (await (await client.get(step_url)).json())["execCode"] == "await page.goto(helpers.getEnvUrl())"

    problem = await problem_of(
        await client.post(f"{API}/snippets", json={"alias": "login", "title": "Log in", "code": "return ("}),
        400,
    )
    assert problem["errors"] == {"code": "is not valid Python: '(' was never closed (line 1)"}
    assert (await (await client.get(f"{API}/snippets")).json())["total"] == 0


@both_backends
async def test_credential_links(client: Client) -> None:
    scenario = await _scenario(client)
    admin = await created(
        client, f"{API}/credentials", {"name": "admin", "username": "a", "secret": "s3cret"}
    )
    user = await created(client, f"{API}/credentials", {"name": "user"})
    base = f"{API}/scenarios/{scenario['id']}/credentials"

    link = await created(client, base, {"credentialId": admin["id"], "alias": "admin"})
    assert link == {"credentialId": admin["id"], "alias": "admin"}
    assert await (await client.get(f"{base}/{admin['id']}")).json() == link

    problem = await problem_of(
        await client.post(base, json={"credentialId": user["id"], "alias": "admin"}), 409
    )
    assert "alias" in problem["detail"]
    await problem_of(await client.post(base, json={"credentialId": admin["id"], "alias": "other"}), 409)
    await problem_of(await client.post(base, json={"credentialId": str(uuid.uuid4()), "alias": "x"}), 400)
    await problem_of(await client.post(base, json={"credentialId": user["id"], "alias": "1bad alias"}), 400)

    await created(client, base, {"credentialId": user["id"], "alias": "user"})
    assert [x["alias"] for x in await (await client.get(base)).json()] == ["admin", "user"]
    scenario_read = await (await client.get(f"{API}/scenarios/{scenario['id']}")).json()
    assert len(scenario_read["credentials"]) == 2

    problem = await problem_of(await client.delete(f"{API}/credentials/{admin['id']}"), 409)
    assert "linked" in problem["detail"]

    deleted = await client.delete(f"{base}/{admin['id']}")
    assert deleted.status == 204 and await deleted.read() == b""
    await problem_of(await client.delete(f"{base}/{admin['id']}"), 404)
    await problem_of(await client.get(f"{base}/{admin['id']}"), 404)
    assert (await client.delete(f"{API}/credentials/{admin['id']}")).status == 204


async def test_scenario_created_with_links(client: Client) -> None:
    credential = await created(client, f"{API}/credentials", {"name": "admin"})
    scenario = await _scenario(client, credentials=[{"credentialId": credential["id"], "alias": "admin"}])
    assert scenario["credentials"] == [{"credentialId": credential["id"], "alias": "admin"}]
    duplicate = [
        {"credentialId": credential["id"], "alias": "a"},
        {"credentialId": credential["id"], "alias": "b"},
    ]
    await problem_of(await client.post(f"{API}/scenarios", json={"name": "x", "credentials": duplicate}), 400)
