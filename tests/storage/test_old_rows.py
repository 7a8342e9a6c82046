"""Rows written under older, looser rules stay readable: a read builds values without their validators.

Each row here is inserted straight into the tables, bypassing the domain, with values today's rules
refuse: a name over a maximum that was tightened since, a blank name, time limits over the bound, a
step numbered 0, aliases the alias rule no longer allows, and a run whose JSON documents carry a key
this version does not know and lack keys it added. They must list, read, present and export.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import attrs
import pytest
import sqlalchemy as sa

from scenariokit.domain import model
from scenariokit.domain.model import FieldErrors, RunErrorKind, RunStatus, StepStatus
from scenariokit.formats.presenters import (
    credential_json,
    environment_json,
    run_detail_json,
    scenario_json,
    snippet_json,
)
from scenariokit.services import Services
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t
from scenariokit.storage.sqlalchemy.rows import restorer

#: a name that was within the maximum when it was written; the rule is tightened below it in each test
OLD_NAME = "a name written when up to 200 characters were allowed"
WHEN = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)


@pytest.fixture(autouse=True)
def tightened_name_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Today's rule: names of at most 20 characters (the rows were written when 200 were allowed)."""
    monkeypatch.setattr(model, "NAME_MAX", 20)


@attrs.frozen
class OldRows:
    environment: uuid.UUID
    credential: uuid.UUID
    snippet: uuid.UUID
    scenario: uuid.UUID
    step: uuid.UUID
    run: uuid.UUID


async def _insert_old_rows(store: SqlStore) -> OldRows:
    ids = OldRows(*(uuid.uuid4() for _ in range(6)))
    stamps = {"created_at": WHEN, "updated_at": WHEN}
    async with store.engine.begin() as conn:
        await conn.execute(
            sa.insert(t.environments).values(
                id=ids.environment,
                name=OLD_NAME,
                description=None,
                data={"url": "http://127.0.0.1:1"},
                **stamps,
            )
        )
        await conn.execute(  # a blank name: never allowed by the API, but a row may hold one
            sa.insert(t.credentials).values(
                id=ids.credential,
                name="   ",
                description=None,
                username="root",
                secret_encrypted=None,
                **stamps,
            )
        )
        await conn.execute(
            sa.insert(t.snippets).values(
                id=ids.snippet, alias="9 lives!", title=OLD_NAME, description=None, code="return 1", **stamps
            )
        )
        await conn.execute(
            sa.insert(t.scenarios).values(
                id=ids.scenario,
                name=OLD_NAME,
                description="old",
                environment_id=ids.environment,
                timeout_seconds=7200.0,  # over today's bound of 3600
                **stamps,
            )
        )
        await conn.execute(
            sa.insert(t.steps).values(
                id=ids.step,
                scenario_id=ids.scenario,
                position=0,  # steps are numbered from 1 today
                title=OLD_NAME * 3,
                exec_code="await page.goto(helpers.getEnvUrl())",
                timeout_seconds=9999.0,
            )
        )
        await conn.execute(
            sa.insert(t.scenario_credentials).values(
                scenario_id=ids.scenario, credential_id=ids.credential, alias="bad alias!", position=0
            )
        )
        await conn.execute(
            sa.insert(t.runs).values(
                id=ids.run,
                scenario_id=ids.scenario,
                scenario_name=OLD_NAME,
                environment_id=ids.environment,
                save_session=False,
                status="fail",
                # the API's shape of the day, with a key since retired and without keys added since
                error={"kind": "timeout", "message": "slow", "stepId": str(ids.step), "hint": "retired key"},
                step_results=[
                    {
                        "stepId": str(ids.step),
                        "order": 0,
                        "status": "fail",
                        "title": OLD_NAME,
                        "startedAt": "2024-05-01T12:00:00.123Z",
                        "durationMs": 5,
                        "error": "slow",
                        "retired": True,
                    }
                ],
                artifacts=["step-0.png"],
                created_at=WHEN,
                started_at=WHEN,
                finished_at=WHEN,
                timings={"queuedMs": 3, "steps": [{"stepId": str(ids.step), "order": 0, "durationMs": 5}]},
            )
        )
    return ids


async def test_old_rows_list_read_present_and_export(store: SqlStore, services: Services) -> None:
    ids = await _insert_old_rows(store)
    conv = services.converter

    (scenario,) = (await services.scenarios.list()).items
    assert scenario == await services.scenarios.get(ids.scenario)
    assert (scenario.name, scenario.timeout_seconds) == (OLD_NAME, 7200.0)
    (step,) = scenario.steps
    assert (step.order, step.timeout_seconds, step.title) == (0, 9999.0, OLD_NAME * 3)
    assert scenario.credentials[0].alias == "bad alias!"
    assert scenario_json(conv, scenario)["name"] == OLD_NAME

    (environment,) = (await services.environments.list()).items
    assert environment_json(conv, environment)["name"] == OLD_NAME
    (credential,) = (await services.credentials.list()).items
    assert credential_json(conv, credential)["name"] == "   "
    snippet = await services.snippets.get(ids.snippet)
    assert snippet_json(conv, snippet)["alias"] == "9 lives!"
    assert (await services.snippets.list()).items == (snippet,)

    (listed,) = (await services.runs.list()).items
    detail = await services.runs.get(ids.run)
    run = detail.run
    assert listed.run == run
    assert run.status is RunStatus.FAIL
    assert run.error == model.RunError(kind=RunErrorKind.TIMEOUT, message="slow", step_id=ids.step)
    (result,) = run.step_results
    assert (result.order, result.status, result.duration_ms) == (0, StepStatus.FAIL, 5)
    assert result.started_at == WHEN
    assert run.timings == model.RunTimings(queued_ms=3, steps=(model.StepTiming(ids.step, 0, 5),))
    shown = run_detail_json(conv, detail)
    assert shown["scenario"]["name"] == OLD_NAME

    exported = await services.transfer.export_scenarios(
        include_environment=True, credential_ids=[ids.credential]
    )
    assert OLD_NAME in exported and "bad alias!" in exported and "timeoutSeconds: 7200" in exported
    assert "9 lives!" in await services.transfer.export_snippet(ids.snippet)


async def test_a_value_made_from_an_old_row_is_validated(store: SqlStore, services: Services) -> None:
    """Reads do not validate; every new value does, so an old row is rewritten only once fixed."""
    ids = await _insert_old_rows(store)
    environment = await services.environments.get(ids.environment)
    with pytest.raises(FieldErrors) as refused:
        attrs.evolve(environment, description="touched")
    assert "name" in refused.value.errors
    fixed = await services.environments.update(ids.environment, {"name": "short", "data": environment.data})
    assert (await services.environments.get(ids.environment)).name == fixed.name == "short"


def test_a_restored_value_skips_validators_but_keeps_converters_and_defaults() -> None:
    """No global switch is flipped: a value made meanwhile, anywhere, is still validated."""
    restore = restorer(model.Scenario)
    late, early = model.Step(exec_code="b", order=2), model.Step(exec_code="a", order=1)

    scenario = restore({"name": "", "timeout_seconds": 7200, "steps": (late, early)})

    assert scenario.name == "" and scenario.timeout_seconds == 7200.0
    assert type(scenario.timeout_seconds) is float  # the converter ran
    assert scenario.steps == (early, late)  # so did the sorting one
    assert scenario.credentials == () and scenario.created_at.tzinfo is UTC  # defaults, factories too
    assert not attrs.validators.get_disabled()
    with pytest.raises(FieldErrors):
        model.Scenario(name="")
