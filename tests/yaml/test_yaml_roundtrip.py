"""Export, import into an empty store, export again: the same text, on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transfer_records import FixtureSet, snapshot

from scenariokit.services import Services


async def export_all(services: Services, fixture_set: FixtureSet) -> str:
    return await services.transfer.export_scenarios(
        include_environment=True,
        credential_ids=list(fixture_set.credentials.values()),
        include_secrets=True,
    )


@pytest.mark.platform
async def test_export_import_export_gives_identical_text(
    services: Services, other_services: Services, fixture_set: FixtureSet
) -> None:
    first = await export_all(services, fixture_set)

    report = await other_services.transfer.import_yaml(first, kind="scenario")
    second = await export_all(other_services, fixture_set)

    assert second == first
    assert report.to_json()["counts"] == {"created": 3 + 2 + 3, "updated": 0}


async def test_round_trip_keeps_every_field_and_secret(
    services: Services, other_services: Services, fixture_set: FixtureSet
) -> None:
    await other_services.transfer.import_yaml(await export_all(services, fixture_set), kind="scenario")

    for ident in fixture_set.scenarios.values():
        original, copy = await services.scenarios.get(ident), await other_services.scenarios.get(ident)
        assert (copy.name, copy.description, copy.environment_id, copy.timeout_seconds) == (
            original.name,
            original.description,
            original.environment_id,
            original.timeout_seconds,
        )
        assert copy.steps == original.steps
        assert copy.credentials == original.credentials
    for ident in fixture_set.credentials.values():
        copied = await other_services.credentials.get(ident)
        assert copied.secret == (await services.credentials.get(ident)).secret
    bare = await other_services.scenarios.get(fixture_set.scenarios["bare"])
    assert bare.description is None
    assert (await other_services.scenarios.get(fixture_set.scenarios["empty"])).description == ""


async def test_reimporting_an_export_into_its_own_store_changes_no_content(
    services: Services, fixture_set: FixtureSet
) -> None:
    text = await export_all(services, fixture_set)
    before = await snapshot(services)

    report = await services.transfer.import_yaml(text, kind="scenario")

    assert report.to_json()["counts"] == {"created": 0, "updated": 8}
    assert await export_all(services, fixture_set) == text
    after = await snapshot(services)
    assert [s.steps for s in after["scenarios"]] == [s.steps for s in before["scenarios"]]


async def test_single_entity_exports_round_trip(
    services: Services, other_services: Services, fixture_set: FixtureSet
) -> None:
    transfer, other = services.transfer, other_services.transfer
    env_id, cred_id, snippet_id = (
        fixture_set.environments["staging"],
        fixture_set.credentials["admin"],
        fixture_set.snippets["login"],
    )
    env_text = await transfer.export_environment(env_id)
    cred_text = await transfer.export_credential(cred_id, include_secrets=True)
    snippet_text = await transfer.export_snippet(snippet_id)

    await other.import_yaml(env_text, kind="environment")
    await other.import_yaml(cred_text, kind="credential")
    await other.import_yaml(snippet_text, kind="snippet")

    assert await other.export_environment(env_id) == env_text
    assert await other.export_credential(cred_id, include_secrets=True) == cred_text
    assert await other.export_snippet(snippet_id) == snippet_text


# Text the databases hold: no NUL (PostgreSQL refuses it) and no lone surrogates.
code_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)
# Step code must compile, so arbitrary text goes into comments; blank lines, indentation, every line
# ending and the characters YAML cares about stay in play.
_comment_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\n\r"), max_size=40
)
_blank = st.text(st.sampled_from(" \t"), max_size=4)
_line = (
    _blank
    | st.tuples(_blank, _comment_text).map(lambda parts: f"{parts[0]}#{parts[1]}")
    | st.sampled_from(["pass", "x = 'é 🙂'", "log('a: b - c | d')", "a = 1  ", "if True:\n\tlog('tab')  "])
)
_ended_line = st.tuples(_line, st.sampled_from(["\n", "\r\n", "\r"]))
tricky_code = st.tuples(st.lists(_ended_line, max_size=6), _line).map(
    lambda parts: "".join(line + end for line, end in parts[0]) + parts[1]
)
names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(
    lambda s: s.strip() == s and s != ""
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names, description=st.none() | code_text, codes=st.lists(tricky_code, max_size=3))
async def test_random_names_and_code_survive_export_and_import(
    lite: Services, lite_other: Services, name: str, description: str | None, codes: list[str]
) -> None:
    # The stores are shared by the examples; every example makes a scenario with a fresh id.
    scenario = await lite.scenarios.create(
        {"name": name, "description": description, "steps": [{"execCode": code} for code in codes]}
    )
    text = await lite.transfer.export_scenarios([scenario.id])
    await lite_other.transfer.import_yaml(text, kind="scenario")
    copy = await lite_other.scenarios.get(scenario.id)
    assert (copy.name, copy.description) == (scenario.name, description)
    assert [step.exec_code for step in copy.steps] == codes
    assert await lite_other.transfer.export_scenarios([scenario.id]) == text
