"""Every model survives convert → store → load → convert unchanged, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenariokit.domain.model import (
    Credential,
    CredentialLink,
    Environment,
    Run,
    RunError,
    RunErrorKind,
    RunStatus,
    Scenario,
    Session,
    SessionStatus,
    Snippet,
    Step,
    StepResult,
    StepStatus,
)
from scenariokit.formats.convert import make_converter
from scenariokit.storage.sqlalchemy import SqlStore

# Text the databases can hold: no NUL (PostgreSQL refuses it in text) and no lone surrogates.
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
names = text.filter(lambda s: s.strip() != "").map(lambda s: s[:200])
maybe_text = st.none() | text
timeouts = st.none() | st.floats(min_value=0.001, max_value=3600) | st.integers(min_value=1, max_value=3600)
aliases = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
env_data = st.dictionaries(text, json_values, max_size=4)

steps = st.lists(st.builds(Step, exec_code=text, title=maybe_text, timeout_seconds=timeouts), max_size=4).map(
    lambda items: tuple(attrs.evolve(s, order=i) for i, s in enumerate(items, start=1))
)
environments = st.builds(
    Environment, name=names, description=maybe_text, data=env_data, created_at=times, updated_at=times
)
credentials = st.builds(
    Credential,
    name=names,
    description=maybe_text,
    username=maybe_text,
    secret=st.none() | text.filter(bool),
    created_at=times,
    updated_at=times,
)
snippets = st.builds(
    Snippet, alias=aliases, title=names, description=maybe_text, code=text, created_at=times, updated_at=times
)
sessions = st.builds(
    Session,
    name=names,
    status=st.sampled_from(SessionStatus),
    token=st.none() | text.filter(bool),
    storage_state=st.none()
    | st.fixed_dictionaries({"cookies": st.lists(st.dictionaries(text, text, max_size=2), max_size=2)}),
    run_id=st.none() | st.uuids(),
    created_at=times,
    updated_at=times,
)

SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def json_roundtrip(value: object) -> object:
    """The value after a trip through its JSON shape."""
    conv = make_converter()
    return conv.structure(conv.unstructure(value), type(value))


@pytest.mark.parametrize(
    "model",
    [environments, credentials, snippets, sessions],
    ids=["environment", "credential", "snippet", "session"],
)
@SETTINGS
@given(data=st.data())
async def test_simple_models_survive_convert_store_load_convert(
    store: SqlStore, model: st.SearchStrategy, data: st.DataObject
) -> None:
    item = json_roundtrip(data.draw(model))
    if isinstance(item, Snippet):  # examples share one store; aliases are unique in it
        item = attrs.evolve(item, alias=f"{item.alias[:50]}-{uuid.uuid4().hex[:8]}")
    repo_name = {
        Environment: "environments",
        Credential: "credentials",
        Snippet: "snippets",
        Session: "sessions",
    }[type(item)]
    async with store.unit_of_work() as uow:
        await getattr(uow, repo_name).add(item)
        await uow.commit()
    async with store.unit_of_work() as uow:
        loaded = await getattr(uow, repo_name).get(item.id)
    assert loaded == item
    assert json_roundtrip(loaded) == item


@SETTINGS
@given(
    scenario_name=names,
    description=maybe_text,
    timeout=timeouts,
    scenario_steps=steps,
    link_aliases=st.lists(aliases, unique=True, max_size=3),
    env=environments,
    created=times,
    status=st.sampled_from(RunStatus),
    with_error=st.booleans(),
)
async def test_scenarios_and_runs_survive_convert_store_load_convert(
    store: SqlStore,
    scenario_name: str,
    description: str | None,
    timeout: float | None,
    scenario_steps: tuple[Step, ...],
    link_aliases: list[str],
    env: Environment,
    created: datetime,
    status: RunStatus,
    with_error: bool,
) -> None:
    creds = [Credential(name=f"c{i}", secret="s") for i in range(len(link_aliases))]
    scenario = Scenario(
        name=scenario_name,
        description=description,
        environment_id=env.id,
        timeout_seconds=timeout,
        steps=scenario_steps,
        credentials=tuple(
            CredentialLink(credential_id=c.id, alias=a) for c, a in zip(creds, link_aliases, strict=True)
        ),
        created_at=created,
        updated_at=created,
    )
    results = tuple(
        StepResult(
            step_id=s.id,
            order=s.order,
            title=s.title,
            status=StepStatus.PASS,
            started_at=created,
            duration_ms=5,
        )
        for s in scenario_steps
    )
    run = Run(
        scenario_id=scenario.id,
        environment_id=env.id,
        scenario_name=scenario.name,
        status=status,
        error=RunError(kind=RunErrorKind.TIMEOUT, message="slow", step_id=uuid.uuid4())
        if with_error
        else None,
        step_results=results,
        artifacts=("step-1.png",) if with_error else (),
        created_at=created,
        started_at=created,
        finished_at=created + timedelta(seconds=2),
    )
    scenario, run = json_roundtrip(scenario), json_roundtrip(run)
    async with store.unit_of_work() as uow:
        await uow.environments.add(env)
        for credential in creds:
            await uow.credentials.add(credential)
        await uow.scenarios.add(scenario)
        await uow.runs.add(run)
        await uow.commit()
    async with store.unit_of_work() as uow:
        assert await uow.scenarios.get(scenario.id) == scenario
        loaded_run = await uow.runs.get(run.id)
    assert loaded_run == run
    assert json_roundtrip(loaded_run) == run
    assert loaded_run.duration_ms == 2000
    assert type(loaded_run.status) is RunStatus
    assert loaded_run.error is None or type(loaded_run.error.kind) is RunErrorKind
