"""Typed commands at the service edge: the converter builds them, the Kit's door takes JSON too."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import scenariokit
from scenariokit.domain.errors import ValidationError
from scenariokit.formats.convert import make_converter, structure_input
from scenariokit.formats.inputs import CredentialInput, Patch, RunInput, ScenarioInput, StepInput


def test_a_patch_holds_only_the_fields_given_each_checked_by_the_inputs_rules() -> None:
    converter = make_converter()
    patch = structure_input(converter, {"description": None, "timeoutSeconds": 5}, Patch[ScenarioInput])
    assert patch.changes == {"description": None, "timeout_seconds": 5}
    current = {"name": "kept", "description": "old", "timeout_seconds": 9}
    assert patch.applied_to(current, ScenarioInput) == ScenarioInput(name="kept", timeout_seconds=5)
    with pytest.raises(ValidationError) as refused:
        structure_input(converter, {"name": " ", "timeoutSeconds": 0}, Patch[ScenarioInput], what="scenario")
    assert refused.value.errors == {
        "name": "is required and must not be blank",
        "timeoutSeconds": "must be greater than 0 and at most 3600",
    }
    with pytest.raises(ValidationError) as refused:
        structure_input(converter, {"order": 1}, Patch[ScenarioInput], what="scenario")
    assert refused.value.errors == {"order": "unknown field"}
    with pytest.raises(ValidationError) as refused:
        structure_input(converter, {"timeoutSeconds": 0, "execCode": 3}, Patch[StepInput], what="step")
    assert set(refused.value.errors) == {"execCode"}


def test_a_hand_built_patch_is_checked_when_applied_and_never_shows_a_secret() -> None:
    with pytest.raises(ValidationError) as refused:
        Patch({"timeout_seconds": -1}).applied_to({"name": "s"}, ScenarioInput)
    assert refused.value.errors == {"timeoutSeconds": "must be greater than 0 and at most 3600"}
    patch = structure_input(make_converter(), {"secret": "hunter2"}, Patch[CredentialInput])
    assert "hunter2" not in repr(patch)


def test_a_patch_may_correct_a_stored_value_todays_rules_refuse() -> None:
    stored = {"name": "n" * 500, "description": None}  # a name longer than today's limit
    patch = structure_input(make_converter(), {"name": "short"}, Patch[ScenarioInput])
    assert patch.applied_to(stored, ScenarioInput).name == "short"
    with pytest.raises(ValidationError) as refused:
        Patch({"description": "only this"}).applied_to(stored, ScenarioInput)
    assert set(refused.value.errors) == {"name"}


def test_a_run_input_needs_an_environment_and_takes_the_scenario_alias() -> None:
    converter = make_converter()
    scenario, environment = uuid.uuid4(), uuid.uuid4()
    with pytest.raises(ValidationError) as refused:
        structure_input(converter, {"scenarioId": str(scenario)}, RunInput, what="run")
    assert refused.value.errors == {"environmentId": "is required"}
    given = {"scenario": {"id": str(scenario), "name": "x"}, "environmentId": str(environment)}
    assert structure_input(converter, given, RunInput) == RunInput(scenario, environment)


async def test_the_kit_takes_json_or_typed_commands_and_structures_json_once(tmp_path: Path) -> None:
    async with scenariokit.open_kit(f"sqlite:///{tmp_path}/kit.db", secret_key="k") as kit:
        typed = await kit.scenarios.create(ScenarioInput(name="typed"))
        mapped = await kit.scenarios.create({"name": "mapped", "steps": [{"execCode": "pass"}]})
        assert [step.exec_code for step in mapped.steps] == ["pass"]
        updated = await kit.scenarios.update(typed.id, {"description": "via JSON"})
        assert (updated.name, updated.description) == ("typed", "via JSON")
        with pytest.raises(ValidationError) as refused:
            await kit.scenarios.add_step(typed.id, {"execCode": "pass", "timeoutSeconds": "soon"})
        assert refused.value.errors == {"timeoutSeconds": "must be a number"}
        with pytest.raises(ValidationError) as refused:
            await kit.runs.create({"scenarioId": str(typed.id)})
        assert refused.value.errors == {"environmentId": "is required"}
        assert (await kit.runs.list()).total == 0
        assert (await kit.scenarios.get(typed.id)).steps == ()
