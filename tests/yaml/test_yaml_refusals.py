"""Every refused import names the document and the line, and leaves the store exactly as it was."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from transfer_records import FixtureSet, snapshot

from scenariokit.domain.errors import Conflict, TooLarge, ValidationError
from scenariokit.services import Services

# Two valid documents that would change the store (a rename and a new record): a refusal later in the
# stream must undo them too. The document after them is documents[2] and starts on line 8.
PREFIX = "kind: environment\nid: {staging}\nname: renamed\n---\nkind: environment\nname: brand new\n---\n"

Case = Callable[[FixtureSet], str]
BAD_DOCUMENTS: dict[str, tuple[Case, str, int, str]] = {
    "malformed YAML": (
        lambda fs: "kind: scenario\nname: [unclosed\nsteps: []\n",
        "documents[2]",
        10,
        "malformed YAML",
    ),
    "unknown field": (
        lambda fs: "kind: scenario\nname: x\nsteps:\n  - execCode: a\n    sessionName: old\n",
        "documents[2].steps[0].sessionName",
        12,
        "unknown field",
    ),
    "wrong type": (
        lambda fs: "kind: scenario\nname: x\ntimeoutSeconds: soon\n",
        "documents[2].timeoutSeconds",
        10,
        "must be a number",
    ),
    "out of bounds": (
        lambda fs: "kind: scenario\nname: x\nsteps:\n  - execCode: a\n    timeoutSeconds: 3601\n",
        "documents[2].steps[0].timeoutSeconds",
        12,
        "at most 3600",
    ),
    "missing required field": (
        lambda fs: "kind: scenario\nname: x\nsteps:\n  - title: no code\n",
        "documents[2].steps[0].execCode",
        11,
        "is required",
    ),
    "step code that does not compile": (
        lambda fs: "kind: scenario\nname: x\nsteps:\n  - execCode: |\n      await page.goto(\n",
        "documents[2].steps[0].execCode",
        11,
        "is not valid Python: '(' was never closed (line 1)",
    ),
    "blank name": (lambda fs: "kind: scenario\nname: '  '\n", "documents[2].name", 9, "must not be blank"),
    "wrong kind": (lambda fs: "kind: snippet\nalias: a\ntitle: t\n", "documents[2].kind", 8, "does not fit"),
    "unknown kind": (lambda fs: "kind: widget\nname: w\n", "documents[2].kind", 8, "unknown kind"),
    "bad id": (lambda fs: "kind: scenario\nid: 42\nname: x\n", "documents[2].id", 9, "UUID"),
    "dangling credential": (
        lambda fs: (
            f"kind: scenario\nname: x\ncredentials:\n  - credentialId: {uuid.UUID(int=7)}\n    alias: a\n"
        ),
        "documents[2].credentials[0].credentialId",
        11,
        "no credential with id",
    ),
    "dangling environment": (
        lambda fs: f"kind: scenario\nname: x\nenvironmentId: {uuid.UUID(int=8)}\n",
        "documents[2].environmentId",
        10,
        "no environment with id",
    ),
    "duplicate alias in a scenario": (
        lambda fs: (
            "kind: scenario\nname: x\ncredentials:\n"
            f"  - credentialId: {fs.credentials['admin']}\n    alias: a\n"
            f"  - credentialId: {fs.credentials['reader']}\n    alias: a\n"
        ),
        "documents[2].credentials",
        10,
        "aliases must be unique",
    ),
    "same id twice in the stream": (
        lambda fs: "kind: environment\nid: {staging}\nname: again\n".format(
            staging=fs.environments["staging"]
        ),
        "documents[2].id",
        9,
        "same environment id is in documents[0]",
    ),
    "python tag": (
        lambda fs: "kind: scenario\nname: !!python/object/apply:os.system ['true']\n",
        "documents[2].name",
        9,
        "!!python/object/apply:os.system",
    ),
    "custom tag": (lambda fs: "kind: scenario\nname: !secret x\n", "documents[2].name", 9, "tag !secret"),
    "list item that is not a mapping": (
        lambda fs: "- kind: scenario\n  name: x\n- just text\n",
        "documents[2][1]",
        10,
        "must be a mapping",
    ),
}


# These are refused before anything is written, so SQLite alone proves them; the refusals below that
# come after writes have begun (conflicts) run on PostgreSQL too.
@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
async def test_a_bad_document_refuses_the_whole_import_and_names_document_and_line(
    lite: Services, lite_set: FixtureSet, case: str
) -> None:
    build, key, line, why = BAD_DOCUMENTS[case]
    text = PREFIX.format(staging=lite_set.environments["staging"]) + build(lite_set)
    before = await snapshot(lite)

    with pytest.raises(ValidationError) as refused:
        await lite.transfer.import_yaml(text, kind="scenario")

    assert key in refused.value.errors, refused.value.errors
    assert refused.value.errors[key].startswith(f"line {line}: ")
    assert why in refused.value.errors[key]
    assert f"{key} (line {line})" in refused.value.message
    assert await snapshot(lite) == before


async def test_a_dangling_reference_changes_nothing_on_either_database(
    services: Services, fixture_set: FixtureSet
) -> None:
    build, key, _, _ = BAD_DOCUMENTS["dangling credential"]
    text = PREFIX.format(staging=fixture_set.environments["staging"]) + build(fixture_set)
    before = await snapshot(services)

    with pytest.raises(ValidationError) as refused:
        await services.transfer.import_yaml(text, kind="scenario")

    assert key in refused.value.errors
    assert await snapshot(services) == before


async def test_all_problems_of_a_stream_are_reported_together(lite: Services) -> None:
    text = "kind: scenario\nname: 5\n---\nkind: environment\n---\nkind: scenario\nname: ok\nsteps: [{}]\n"

    with pytest.raises(ValidationError) as refused:
        await lite.transfer.import_yaml(text, kind="scenario")

    assert refused.value.errors == {
        "documents[0].name": "line 2: must be a string",
        "documents[1].name": "line 4: is required",
        "documents[2].steps[0].execCode": "line 8: is required",
    }
    assert "(and 2 more problems)" in refused.value.message


@pytest.mark.parametrize(
    ("endpoint", "document"),
    [
        ("environment", "kind: credential\nname: c\n"),
        ("credential", "kind: environment\nname: e\n"),
        ("snippet", "kind: scenario\nname: s\n"),
        ("environment", "kind: scenario\nname: s\n"),
    ],
)
async def test_each_endpoint_takes_only_its_own_kind(lite: Services, endpoint: str, document: str) -> None:
    with pytest.raises(ValidationError) as refused:
        await lite.transfer.import_yaml(document, kind=endpoint)

    assert list(refused.value.errors) == ["documents[0].kind"]
    assert f"the {endpoint} import" in refused.value.message


async def test_a_billion_laughs_is_refused_quickly_and_changes_nothing(
    services: Services, fixture_set: FixtureSet
) -> None:
    laughs = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    laughs += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    text = PREFIX.format(staging=fixture_set.environments["staging"]) + "\n".join(laughs) + "\ndata: *a9\n"
    before = await snapshot(services)

    with pytest.raises(TooLarge):
        await services.transfer.import_yaml(text, kind="environment")

    assert await snapshot(services) == before


async def test_text_over_the_limit_is_refused_and_changes_nothing(
    services: Services, fixture_set: FixtureSet
) -> None:
    text = PREFIX.format(staging=fixture_set.environments["staging"]) + "kind: scenario\nname: x\n"
    padding = "#" + "x" * (5 * 1024 * 1024) + "\n"
    before = await snapshot(services)

    with pytest.raises(TooLarge):
        await services.transfer.import_yaml(text + padding, kind="scenario")

    assert await snapshot(services) == before


async def test_a_snippet_alias_held_by_another_snippet_is_a_conflict_and_changes_nothing(
    services: Services, fixture_set: FixtureSet
) -> None:
    other = await services.snippets.create({"alias": "other", "title": "Other"})
    text = (
        f"kind: snippet\nid: {other.id}\nalias: renamed-first\ntitle: Written before the conflict\n"
        "---\nkind: snippet\nalias: login\ntitle: Takes the alias of another snippet\n"
    )
    before = await snapshot(services)

    with pytest.raises(Conflict, match=r"documents\[1\] \(line 6\).*alias 'login'"):
        await services.transfer.import_yaml(text, kind="snippet")

    assert await snapshot(services) == before


async def test_two_snippets_of_one_stream_with_one_alias_are_refused(lite: Services) -> None:
    text = "- alias: same\n  title: one\n- alias: same\n  title: two\n"

    with pytest.raises(ValidationError) as refused:
        await lite.transfer.import_yaml(text, kind="snippet")

    assert refused.value.errors == {
        "documents[0][1].alias": "line 3: the alias 'same' is also in documents[0][0]"
    }


async def test_a_step_id_held_by_a_scenario_outside_the_import_is_a_conflict_and_changes_nothing(
    services: Services, fixture_set: FixtureSet
) -> None:
    taken = (await services.scenarios.get(fixture_set.scenarios["login"])).steps[0].id
    text = PREFIX.format(staging=fixture_set.environments["staging"]) + (
        f"kind: scenario\nname: copy\nsteps:\n  - id: {taken}\n    execCode: copied\n"
    )
    before = await snapshot(services)

    with pytest.raises(Conflict, match=rf"documents\[2\]\.steps\[0\]\.id \(line 11\): step {taken} belongs"):
        await services.transfer.import_yaml(text, kind="scenario")

    assert await snapshot(services) == before


async def test_one_step_id_in_two_scenarios_of_the_stream_is_refused(lite: Services) -> None:
    step = uuid.uuid4()
    text = (
        f"- name: a\n  steps:\n    - id: {step}\n      execCode: x\n"
        f"- name: b\n  steps:\n    - id: {step}\n      execCode: y\n"
    )

    with pytest.raises(ValidationError) as refused:
        await lite.transfer.import_yaml(text, kind="scenario")

    assert refused.value.errors == {
        "documents[0][1].steps[0].id": f"line 7: step id {step} is also in documents[0][0]"
    }
