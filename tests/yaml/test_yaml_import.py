"""Import: rules 6 to 9 of the specification, kinds per endpoint, secrets, snippets and the report."""

from __future__ import annotations

import uuid

import pytest

from scenariokit.domain.errors import ValidationError
from scenariokit.services import Services

ENV_ID = "11111111-1111-4111-8111-111111111111"
CRED_ID = "22222222-2222-4222-8222-222222222222"
SCENARIO_ID = "33333333-3333-4333-8333-333333333333"
STEP_ID = "44444444-4444-4444-8444-444444444444"

ENVIRONMENT = f"kind: environment\nid: {ENV_ID}\nname: staging\ndata:\n  url: https://staging.example\n"
CREDENTIAL = f"kind: credential\nid: {CRED_ID}\nname: admin\nusername: admin\nsecret: hunter2\n"
SCENARIO = f"""kind: scenario
id: {SCENARIO_ID}
name: Login
environmentId: {ENV_ID}
credentials:
  - credentialId: {CRED_ID}
    alias: admin
steps:
  - id: {STEP_ID}
    title: open
    execCode: |
      await page.goto(helpers.getEnvUrl())
"""


def indent_as_list_item(document: str) -> str:
    lines = document.splitlines()
    return "\n".join([f"- {lines[0]}"] + [f"  {line}" for line in lines[1:]]) + "\n"


async def assert_imported(services: Services) -> None:
    scenario = await services.scenarios.get(uuid.UUID(SCENARIO_ID))
    assert scenario.environment_id == uuid.UUID(ENV_ID)
    assert [(link.credential_id, link.alias) for link in scenario.credentials] == [
        (uuid.UUID(CRED_ID), "admin")
    ]
    assert [(step.id, step.exec_code) for step in scenario.steps] == [
        (uuid.UUID(STEP_ID), "await page.goto(helpers.getEnvUrl())\n")
    ]
    assert (await services.credentials.get(uuid.UUID(CRED_ID))).secret == "hunter2"


async def test_rule_6_the_older_single_object_format_imports(services: Services) -> None:
    text = "\n".join(
        ["# environments", "---", ENVIRONMENT, "---", CREDENTIAL, "# scenarios", "---", SCENARIO]
    )

    report = await services.transfer.import_yaml(text, kind="scenario")

    await assert_imported(services)
    assert report.to_json()["counts"] == {"created": 3, "updated": 0}


async def test_rule_6_the_newer_list_format_imports(services: Services) -> None:
    text = "".join(indent_as_list_item(doc) for doc in (ENVIRONMENT, CREDENTIAL, SCENARIO))

    await services.transfer.import_yaml(text, kind="scenario")

    await assert_imported(services)


async def test_rule_6_both_formats_mix_in_one_stream(lite: Services) -> None:
    text = indent_as_list_item(ENVIRONMENT) + indent_as_list_item(CREDENTIAL) + "---\n" + SCENARIO

    await lite.transfer.import_yaml(text.encode(), kind="scenario")

    await assert_imported(lite)


async def test_rule_7_references_resolve_whatever_the_order_of_documents(lite: Services) -> None:
    text = "---\n".join([SCENARIO, CREDENTIAL, ENVIRONMENT])

    report = await lite.transfer.import_yaml(text, kind="scenario")

    await assert_imported(lite)
    assert report.created == {
        "scenario": (uuid.UUID(SCENARIO_ID),),
        "environment": (uuid.UUID(ENV_ID),),
        "credential": (uuid.UUID(CRED_ID),),
    }


async def test_rule_7_a_scenario_may_refer_to_records_already_stored(lite: Services) -> None:
    await lite.transfer.import_yaml("---\n".join([ENVIRONMENT, CREDENTIAL]), kind="scenario")

    await lite.transfer.import_yaml(SCENARIO, kind="scenario")

    await assert_imported(lite)


async def test_rule_8_an_existing_id_is_overwritten_and_keeps_its_creation_time(services: Services) -> None:
    env = await services.environments.create({"name": "old", "description": "old", "data": {"a": 1}})
    text = f"kind: environment\nid: {env.id}\nname: new\ndata:\n  b: 2\n"

    report = await services.transfer.import_yaml(text, kind="environment")

    stored = await services.environments.get(env.id)
    assert (stored.name, stored.description, stored.data) == ("new", None, {"b": 2})
    assert stored.created_at == env.created_at
    assert stored.updated_at >= env.updated_at
    assert report.updated == {"environment": (env.id,)}
    assert report.created == {"environment": ()}


async def test_rule_8_an_unknown_id_is_created_with_that_id_and_no_id_gets_a_new_one(lite: Services) -> None:
    text = f"- id: {ENV_ID}\n  name: given\n- name: fresh\n"

    report = await lite.transfer.import_yaml(text, kind="environment")

    given, fresh = report.created["environment"]
    assert given == uuid.UUID(ENV_ID)
    assert (await lite.environments.get(given)).name == "given"
    assert (await lite.environments.get(fresh)).name == "fresh"


async def test_rule_9_a_scenarios_steps_are_deleted_and_recreated_from_the_import(services: Services) -> None:
    scenario = await services.scenarios.create(
        {"name": "s", "steps": [{"execCode": "one"}, {"execCode": "two"}, {"execCode": "three"}]}
    )
    kept, new_id = scenario.steps[1].id, uuid.uuid4()
    text = (
        f"kind: scenario\nid: {scenario.id}\nname: s\nsteps:\n"
        f"  - id: {new_id}\n    execCode: first\n"
        f"  - id: {kept}\n    execCode: two, changed\n    timeoutSeconds: 5\n"
        "  - execCode: no_id\n"
    )

    await services.transfer.import_yaml(text, kind="scenario")

    steps = (await services.scenarios.get(scenario.id)).steps
    assert [(s.order, s.exec_code, s.timeout_seconds) for s in steps] == [
        (1, "first", None),
        (2, "two, changed", 5),
        (3, "no_id", None),
    ]
    assert steps[0].id == new_id
    assert steps[1].id == kept
    assert steps[2].id not in {s.id for s in scenario.steps}


async def test_rule_9_a_scenario_without_steps_or_links_loses_them(lite: Services) -> None:
    await lite.transfer.import_yaml("---\n".join([ENVIRONMENT, CREDENTIAL, SCENARIO]), kind="scenario")

    await lite.transfer.import_yaml(f"id: {SCENARIO_ID}\nname: Login\n", kind="scenario")

    scenario = await lite.scenarios.get(uuid.UUID(SCENARIO_ID))
    assert (scenario.steps, scenario.credentials, scenario.environment_id) == ((), (), None)


async def test_steps_may_move_between_scenarios_of_one_import(services: Services) -> None:
    first = await services.scenarios.create({"name": "first", "steps": [{"execCode": "moving"}]})
    second = await services.scenarios.create({"name": "second"})
    step_id = first.steps[0].id
    text = (
        f"- kind: scenario\n  id: {second.id}\n  name: second\n"
        f"  steps:\n    - id: {step_id}\n      execCode: moved\n"
        f"- kind: scenario\n  id: {first.id}\n  name: first\n"
    )

    await services.transfer.import_yaml(text, kind="scenario")

    assert (await services.scenarios.get(first.id)).steps == ()
    [moved] = (await services.scenarios.get(second.id)).steps
    assert (moved.id, moved.exec_code) == (step_id, "moved")


async def test_a_document_without_kind_takes_the_endpoints_kind(lite: Services) -> None:
    report = await lite.transfer.import_yaml("name: plain\n", kind="environment")
    snippet_report = await lite.transfer.import_yaml("alias: go\ntitle: Go\ncode: x\n", kind="snippet")

    [env_id] = report.created["environment"]
    assert (await lite.environments.get(env_id)).name == "plain"
    assert (await lite.snippets.get_by_alias("go")).id == snippet_report.created["snippet"][0]


async def test_a_credential_imported_without_a_secret_keeps_the_stored_one(services: Services) -> None:
    credential = await services.credentials.create({"name": "c", "username": "u", "secret": "kept"})

    await services.transfer.import_yaml(f"id: {credential.id}\nname: c2\nusername: u2\n", kind="credential")

    stored = await services.credentials.get(credential.id)
    assert (stored.name, stored.username, stored.secret) == ("c2", "u2", "kept")


async def test_a_credential_imported_with_a_secret_replaces_it_and_an_empty_one_clears_it(
    lite: Services,
) -> None:
    credential = await lite.credentials.create({"name": "c", "secret": "old"})

    await lite.transfer.import_yaml(f"id: {credential.id}\nname: c\nsecret: new\n", kind="credential")
    assert (await lite.credentials.get(credential.id)).secret == "new"

    await lite.transfer.import_yaml(f"id: {credential.id}\nname: c\nsecret: ''\n", kind="credential")
    assert (await lite.credentials.get(credential.id)).secret is None


async def test_a_snippet_is_upserted_by_id_and_may_keep_its_own_alias(lite: Services) -> None:
    snippet = await lite.snippets.create({"alias": "login", "title": "Log in", "code": "old"})

    report = await lite.transfer.import_yaml(
        f"kind: snippet\nid: {snippet.id}\nalias: login\ntitle: Log in\ncode: |\n  new\n", kind="snippet"
    )

    assert report.updated == {"snippet": (snippet.id,)}
    assert (await lite.snippets.get(snippet.id)).code == "new\n"


async def test_renaming_a_scenario_by_import_renames_it_on_its_runs(lite: Services) -> None:
    env = await lite.environments.create({"name": "e"})
    scenario = await lite.scenarios.create({"name": "before"})
    run = await lite.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})

    await lite.transfer.import_yaml(f"id: {scenario.id}\nname: after\n", kind="scenario")

    async with lite.store.unit_of_work() as uow:
        stored = await uow.runs.get(run.id)
    assert stored is not None
    assert stored.scenario_name == "after"


async def test_the_report_lists_ids_per_kind_and_counts(lite: Services) -> None:
    await lite.transfer.import_yaml(ENVIRONMENT, kind="environment")

    report = await lite.transfer.import_yaml(
        "---\n".join([ENVIRONMENT, CREDENTIAL, SCENARIO]), kind="scenario"
    )

    assert report.to_json() == {
        "created": {"scenario": [SCENARIO_ID], "environment": [], "credential": [CRED_ID]},
        "updated": {"scenario": [], "environment": [ENV_ID], "credential": []},
        "counts": {"created": 2, "updated": 1},
        "warnings": [],
    }


async def test_an_empty_stream_imports_nothing(lite: Services) -> None:
    report = await lite.transfer.import_yaml("# scenarios\n", kind="scenario")

    assert report.to_json()["counts"] == {"created": 0, "updated": 0}


async def test_an_unknown_endpoint_kind_is_refused(lite: Services) -> None:
    with pytest.raises(ValidationError, match="import kind"):
        await lite.transfer.import_yaml(ENVIRONMENT, kind="session")
