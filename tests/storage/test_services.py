"""Use cases through the service layer, on both databases."""

from __future__ import annotations

import uuid

import pytest

from scenariokit.domain.errors import Conflict, NotFound, ValidationError
from scenariokit.domain.model import RunErrorKind, RunStatus
from scenariokit.services import Services


async def _fixture(services: Services) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    env = await services.environments.create({"name": "staging", "data": {"url": "http://127.0.0.1:1"}})
    cred = await services.credentials.create({"name": "admin", "username": "root", "secret": "hunter2"})
    scenario = await services.scenarios.create(
        {
            "name": "checkout",
            "environmentId": str(env.id),
            "timeoutSeconds": 120,
            "steps": [{"execCode": "first"}, {"execCode": "second", "timeoutSeconds": 5}],
            "credentials": [{"credentialId": str(cred.id), "alias": "admin"}],
        }
    )
    return scenario.id, env.id, cred.id


async def test_steps_are_numbered_inserted_moved_and_reordered(services: Services) -> None:
    scenario_id, _, _ = await _fixture(services)
    first, second = await services.scenarios.list_steps(scenario_id)
    inserted = await services.scenarios.add_step(scenario_id, {"execCode": "zero", "order": 1})
    assert inserted.order == 1
    assert [s.exec_code for s in await services.scenarios.list_steps(scenario_id)] == [
        "zero",
        "first",
        "second",
    ]
    moved = await services.scenarios.update_step(scenario_id, inserted.id, {"order": 3})
    assert moved.order == 3 and moved.exec_code == "zero"
    assert [s.exec_code for s in await services.scenarios.list_steps(scenario_id)] == [
        "first",
        "second",
        "zero",
    ]
    steps = await services.scenarios.reorder_steps(
        scenario_id, {"stepIds": [str(second.id), str(inserted.id), str(first.id)]}
    )
    assert [(s.order, s.exec_code) for s in steps] == [(1, "second"), (2, "zero"), (3, "first")]
    await services.scenarios.delete_step(scenario_id, inserted.id)
    assert [(s.order, s.exec_code) for s in await services.scenarios.list_steps(scenario_id)] == [
        (1, "second"),
        (2, "first"),
    ]


async def test_reorder_must_name_every_step_once(services: Services) -> None:
    scenario_id, _, _ = await _fixture(services)
    first, _ = await services.scenarios.list_steps(scenario_id)
    with pytest.raises(ValidationError) as refused:
        await services.scenarios.reorder_steps(scenario_id, {"stepIds": [str(first.id), str(first.id)]})
    assert "stepIds" in refused.value.errors


async def test_patch_keeps_fields_not_named_and_put_replaces(services: Services) -> None:
    scenario_id, env_id, _ = await _fixture(services)
    patched = await services.scenarios.update(scenario_id, {"description": "now documented"})
    assert patched.timeout_seconds == 120 and patched.environment_id == env_id and len(patched.steps) == 2
    replaced = await services.scenarios.replace(scenario_id, {"name": "checkout v2"})
    assert (
        replaced.timeout_seconds is None and replaced.environment_id is None and replaced.description is None
    )
    assert len(replaced.steps) == 2, "PUT without steps keeps the steps"


async def test_bad_input_names_the_field_and_changes_nothing(services: Services) -> None:
    scenario_id, _, _ = await _fixture(services)
    before = await services.scenarios.get(scenario_id)
    for changes, field in [
        ({"timeoutSeconds": 0}, "timeoutSeconds"),
        ({"timeoutSeconds": 3601}, "timeoutSeconds"),
        ({"timeoutSeconds": "10"}, "timeoutSeconds"),
        ({"name": "  "}, "name"),
        ({"environmentId": str(uuid.uuid4())}, "environmentId"),
        ({"environmentId": "not-a-uuid"}, "environmentId"),
        ({"colour": "red"}, "colour"),
    ]:
        with pytest.raises(ValidationError) as refused:
            await services.scenarios.update(scenario_id, changes)
        assert field in refused.value.errors, (changes, refused.value.errors)
    assert await services.scenarios.get(scenario_id) == before


async def test_links_are_unique_by_alias_and_credential(services: Services) -> None:
    scenario_id, _, cred_id = await _fixture(services)
    other = await services.credentials.create({"name": "other"})
    with pytest.raises(Conflict):
        await services.scenarios.link_credential(
            scenario_id, {"credentialId": str(other.id), "alias": "admin"}
        )
    with pytest.raises(Conflict):
        await services.scenarios.link_credential(
            scenario_id, {"credentialId": str(cred_id), "alias": "again"}
        )
    link = await services.scenarios.link_credential(
        scenario_id, {"credentialId": str(other.id), "alias": "guest"}
    )
    assert [x.alias for x in await services.scenarios.list_links(scenario_id)] == ["admin", "guest"]
    await services.scenarios.unlink_credential(scenario_id, link.credential_id)
    with pytest.raises(NotFound):
        await services.scenarios.unlink_credential(scenario_id, link.credential_id)


async def test_credential_secret_is_kept_when_an_update_omits_it(services: Services) -> None:
    _, _, cred_id = await _fixture(services)
    updated = await services.credentials.update(cred_id, {"username": "admin2"})
    assert updated.secret == "hunter2"
    replaced = await services.credentials.replace(cred_id, {"name": "admin"})
    assert replaced.secret == "hunter2" and replaced.username is None
    cleared = await services.credentials.update(cred_id, {"secret": ""})
    assert cleared.secret is None and not cleared.has_secret


async def test_deleting_a_linked_credential_is_refused(services: Services) -> None:
    _, _, cred_id = await _fixture(services)
    with pytest.raises(Conflict, match="linked to 1 scenario"):
        await services.credentials.delete(cred_id)
    assert (await services.credentials.get(cred_id)).secret == "hunter2"


async def test_snippet_alias_is_unique(services: Services) -> None:
    await services.snippets.create({"alias": "login", "title": "Log in", "code": "return 1"})
    with pytest.raises(Conflict):
        await services.snippets.create({"alias": "login", "title": "Again"})
    other = await services.snippets.create({"alias": "logout", "title": "Log out"})
    with pytest.raises(Conflict):
        await services.snippets.update(other.id, {"alias": "login"})


async def test_deleting_an_environment_keeps_its_runs_readable(services: Services) -> None:
    scenario_id, env_id, _ = await _fixture(services)
    run = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})
    await services.environments.delete(env_id)
    detail = await services.runs.get(run.id)
    assert detail.environment is None and detail.run.environment_id == env_id
    assert (await services.scenarios.get(scenario_id)).environment_id is None


async def test_a_scenario_with_a_run_in_progress_cannot_be_deleted(services: Services) -> None:
    scenario_id, env_id, _ = await _fixture(services)
    run = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})

    with pytest.raises(Conflict, match="1 run\\(s\\) in progress"):
        await services.scenarios.delete(scenario_id)

    assert (await services.scenarios.get(scenario_id)).id == scenario_id
    assert (await services.runs.get(run.id)).run.status is RunStatus.IN_PROGRESS


async def test_deleting_a_scenario_removes_its_steps_links_and_runs(services: Services) -> None:
    scenario_id, env_id, cred_id = await _fixture(services)
    run = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})
    await services.runs.cancel(run.id)  # finished runs go with their scenario
    await services.scenarios.delete(scenario_id)
    with pytest.raises(NotFound):
        await services.runs.get(run.id)
    await services.credentials.delete(cred_id)  # no longer linked


async def test_run_creation_needs_an_environment_and_existing_records(services: Services) -> None:
    scenario_id, env_id, _ = await _fixture(services)
    with pytest.raises(ValidationError) as refused:
        await services.runs.create({"scenarioId": str(scenario_id)})
    assert refused.value.errors == {"environmentId": "is required"}
    with pytest.raises(ValidationError) as refused:
        await services.runs.create({"scenarioId": str(uuid.uuid4()), "environmentId": str(env_id)})
    assert "scenarioId" in refused.value.errors
    run = await services.runs.create(
        {"scenario": str(scenario_id), "environmentId": str(env_id), "saveSession": True}
    )
    assert run.status is RunStatus.IN_PROGRESS and run.save_session and run.scenario_name == "checkout"


async def test_renaming_a_scenario_renames_it_in_its_runs(services: Services) -> None:
    scenario_id, env_id, _ = await _fixture(services)
    run = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})
    await services.scenarios.update(scenario_id, {"name": "renamed"})
    assert (await services.runs.get(run.id)).run.scenario_name == "renamed"


async def test_cancelling_a_queued_run_finishes_it(services: Services) -> None:
    scenario_id, env_id, _ = await _fixture(services)
    run = await services.runs.create({"scenarioId": str(scenario_id), "environmentId": str(env_id)})
    cancelled = await services.runs.cancel(run.id)
    assert (
        cancelled.status is RunStatus.FAIL
        and cancelled.error
        and cancelled.error.kind is RunErrorKind.CANCELLED
    )
    assert [r.status.value for r in cancelled.step_results] == ["skipped", "skipped"]
    with pytest.raises(Conflict):
        await services.runs.cancel(run.id)
    assert await services.runs.claim("worker") is None
