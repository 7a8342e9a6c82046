"""Export: rules 1 to 5 of the specification, secrets, single-entity exports and missing records."""

from __future__ import annotations

import uuid

import pytest
from transfer_records import FixtureSet, documents, populate

from scenariokit.domain.errors import NotFound
from scenariokit.services import Services


async def test_rule_1_export_is_a_stream_of_documents_with_section_comments(
    services: Services, fixture_set: FixtureSet
) -> None:
    text = await services.transfer.export_scenarios(
        include_environment=True, credential_ids=[fixture_set.credentials["admin"]]
    )

    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert comments == ["# environments", "# credentials", "# scenarios"]
    assert text.count("\n---\n") == 2 + 1 + 3
    assert [d["kind"] for d in documents(text)] == ["environment"] * 2 + ["credential"] + ["scenario"] * 3


async def test_rule_2_environments_only_when_asked_and_only_the_scenarios_own(
    lite: Services,
) -> None:
    fixture_set = await populate(lite)
    without = await lite.transfer.export_scenarios()
    with_envs = await lite.transfer.export_scenarios(include_environment=True)

    assert "# environments" not in without
    assert not [d for d in documents(without) if d["kind"] == "environment"]
    exported = {d["id"] for d in documents(with_envs) if d["kind"] == "environment"}
    assert exported == {str(fixture_set.environments["staging"]), str(fixture_set.environments["prod"])}


async def test_rule_2_an_environment_shared_by_scenarios_is_written_once(lite: Services) -> None:
    env = await lite.environments.create({"name": "shared"})
    for name in ("one", "two"):
        await lite.scenarios.create({"name": name, "environmentId": str(env.id)})

    text = await lite.transfer.export_scenarios(include_environment=True)

    assert [d["id"] for d in documents(text) if d["kind"] == "environment"] == [str(env.id)]


async def test_rule_3_only_the_listed_credentials_are_exported(lite: Services) -> None:
    fixture_set = await populate(lite)
    listed = [fixture_set.credentials["spare"], fixture_set.credentials["reader"]]

    text = await lite.transfer.export_scenarios(credential_ids=listed)
    nothing = await lite.transfer.export_scenarios()

    exported = [d["id"] for d in documents(text) if d["kind"] == "credential"]
    assert sorted(exported) == sorted(str(i) for i in listed)
    assert "# credentials" not in nothing
    assert not [d for d in documents(nothing) if d["kind"] == "credential"]


async def test_rule_4_scenarios_carry_their_id_step_ids_and_credential_aliases(
    lite: Services,
) -> None:
    fixture_set = await populate(lite)
    login = await lite.scenarios.get(fixture_set.scenarios["login"])

    text = await lite.transfer.export_scenarios([login.id])

    [doc] = documents(text)
    assert doc["id"] == str(login.id)
    assert [s["id"] for s in doc["steps"]] == [str(s.id) for s in login.steps]
    assert [s["order"] for s in doc["steps"]] == [1, 2, 3]
    assert doc["credentials"] == [
        {"credentialId": str(fixture_set.credentials["admin"]), "alias": "admin"},
        {"credentialId": str(fixture_set.credentials["reader"]), "alias": "ro"},
    ]
    assert doc["environmentId"] == str(fixture_set.environments["staging"])
    assert doc["timeoutSeconds"] == 120
    assert [s["timeoutSeconds"] for s in doc["steps"]] == [10, 2.5, None]


async def test_rule_5_every_entity_carries_its_kind(lite: Services) -> None:
    fixture_set = await populate(lite)

    stream = await lite.transfer.export_scenarios(
        include_environment=True, credential_ids=list(fixture_set.credentials.values())
    )
    singles = [
        await lite.transfer.export_environment(fixture_set.environments["unused"]),
        await lite.transfer.export_credential(fixture_set.credentials["admin"]),
        await lite.transfer.export_snippet(fixture_set.snippets["login"]),
    ]

    assert {d["kind"] for d in documents(stream)} == {"environment", "credential", "scenario"}
    assert [documents(text)[0]["kind"] for text in singles] == ["environment", "credential", "snippet"]
    assert all(text.startswith("kind: ") for text in singles)


async def test_keys_are_in_a_fixed_readable_order_and_timestamps_are_left_out(lite: Services) -> None:
    fixture_set = await populate(lite)

    [scenario] = documents(await lite.transfer.export_scenarios([fixture_set.scenarios["login"]]))
    [snippet] = documents(await lite.transfer.export_snippet(fixture_set.snippets["login"]))

    assert list(scenario) == [
        "kind",
        "id",
        "name",
        "description",
        "environmentId",
        "timeoutSeconds",
        "browser",
        "credentials",
        "steps",
    ]
    assert list(scenario["browser"]) == ["viewport", "colorScheme", "httpCredentials", "userAgent", "video"]
    assert list(scenario["steps"][0]) == ["id", "order", "title", "timeoutSeconds", "execCode"]
    assert list(snippet) == ["kind", "id", "alias", "title", "description", "code"]


async def test_scenarios_are_exported_by_name_whatever_order_was_asked(lite: Services) -> None:
    ids = [(await lite.scenarios.create({"name": name})).id for name in ("b", "c", "a")]

    text = await lite.transfer.export_scenarios(list(reversed(ids)))

    assert [d["name"] for d in documents(text)] == ["a", "b", "c"]


async def test_secrets_are_exported_only_when_asked(lite: Services) -> None:
    fixture_set = await populate(lite)
    admin = fixture_set.credentials["admin"]

    hidden = await lite.transfer.export_scenarios(credential_ids=[admin])
    shown = await lite.transfer.export_scenarios(credential_ids=[admin], include_secrets=True)

    assert "s3cret" not in hidden
    assert "secret" not in documents(hidden)[0]
    assert documents(shown)[0]["secret"] == "s3cret!\n#x"
    assert "s3cret" not in await lite.transfer.export_credential(admin)
    assert "s3cret" in await lite.transfer.export_credential(admin, include_secrets=True)


async def test_an_empty_store_exports_just_the_scenarios_comment(lite: Services) -> None:
    assert await lite.transfer.export_scenarios() == "# scenarios\n"


async def test_missing_records_are_not_found(lite: Services) -> None:
    fixture_set = await populate(lite)
    ghost = uuid.uuid4()

    with pytest.raises(NotFound, match=str(ghost)):
        await lite.transfer.export_scenarios([fixture_set.scenarios["login"], ghost])
    with pytest.raises(NotFound, match=f"credential {ghost}"):
        await lite.transfer.export_scenarios(credential_ids=[fixture_set.credentials["admin"], ghost])
    for export in (
        lite.transfer.export_environment,
        lite.transfer.export_credential,
        lite.transfer.export_snippet,
    ):
        with pytest.raises(NotFound):
            await export(ghost)
