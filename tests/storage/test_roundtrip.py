"""Every model survives convert → store → load → convert unchanged, on SQLite and PostgreSQL.

And every field of every aggregate survives the store alone, to the microsecond.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenariokit.domain.browser import (
    BrowserSettings,
    ColorScheme,
    Geolocation,
    HttpCredentials,
    VideoMode,
    Viewport,
)
from scenariokit.domain.model import (
    Backoff,
    Credential,
    CredentialLink,
    Environment,
    Retries,
    Run,
    RunAttempt,
    RunError,
    RunErrorKind,
    RunLogEntry,
    RunStatus,
    RunTimings,
    Scenario,
    Session,
    SessionStatus,
    Snippet,
    Step,
    StepResult,
    StepStatus,
    StepTiming,
)
from scenariokit.formats.convert import make_converter
from scenariokit.formats.queries import LogQuery
from scenariokit.storage.sqlalchemy import SqlStore

#: browser settings with every key set (an environment's cannot name a credential alias it lacks:
#: environments link none, so the alias is the scenario's)
EVERY_BROWSER_SETTING = BrowserSettings(
    device="Pixel 7",
    viewport=Viewport(width=390, height=844),
    locale="de-DE",
    timezone_id="Europe/Berlin",
    color_scheme=ColorScheme.DARK,
    geolocation=Geolocation(latitude=52.52, longitude=13.405, accuracy=10.5),
    permissions=("geolocation", "clipboard-read"),
    extra_http_headers={"X-Check": "yes"},
    http_credentials=HttpCredentials(credential="admin"),
    ignore_https_errors=True,
    user_agent="scenariokit-test",
    offline=False,
    video=VideoMode.RETAIN_ON_FAILURE,
    block_urls=("**/tracker.js", "https://ads.example/**"),
)

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


def _every_field_set(value: object, path: str = "") -> list[str]:
    """The fields of ``value`` (and of the attrs values inside it) left at a plain default."""
    unset = []
    for field in attrs.fields(type(value)):
        inner = getattr(value, field.name)
        where = f"{path}{type(value).__name__}.{field.name}"
        if not isinstance(field.default, attrs.Factory) and inner == field.default:
            unset.append(where)
        for item in inner if isinstance(inner, tuple) else (inner,):
            if attrs.has(type(item)):
                unset += _every_field_set(item, f"{where}/")
    return unset


async def test_every_field_of_every_aggregate_survives_the_store(store: SqlStore) -> None:
    """Stored and read back as they are (times to the microsecond): no field is dropped or reshaped."""
    when = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
    later = when + timedelta(seconds=1, microseconds=7)
    stamps = {"created_at": when, "updated_at": later}
    environment = Environment(
        name="env",
        description="d",
        data={"url": "http://127.0.0.1:1", "n": [1]},
        browser=EVERY_BROWSER_SETTING,
        **stamps,
    )
    credential = Credential(name="cred", description="d", username="u", secret="s3cret", **stamps)
    snippet = Snippet(alias="login", title="Log in", description="d", code="return 1", **stamps)
    step = Step(exec_code="pass", order=2, title="t", timeout_seconds=2.5)
    scenario = Scenario(
        name="s",
        description="d",
        environment_id=environment.id,
        timeout_seconds=60,
        credentials=(CredentialLink(credential_id=credential.id, alias="admin"),),
        steps=(step,),
        retries=Retries(count=2, backoff=Backoff.EXPONENTIAL, backoff_seconds=1.5),
        browser=attrs.evolve(EVERY_BROWSER_SETTING, http_credentials=HttpCredentials(credential="admin")),
        **stamps,
    )
    session = Session(
        name="held",
        status=SessionStatus.CLOSED,
        token="tok-123456789",
        storage_state={"cookies": [{"name": "a", "value": "b"}], "origins": []},
        run_id=uuid.uuid4(),
        **stamps,
    )
    result = StepResult(
        step_id=step.id,
        order=2,
        status=StepStatus.FAIL,
        title="t",
        started_at=when,
        duration_ms=12,
        error="boom",
    )
    timings = RunTimings(
        queued_ms=1,
        claim_ms=2,
        job_to_worker_ms=3,
        browser_ready_ms=4,
        context_and_page_ms=5,
        steps_ms=6,
        steps=(StepTiming(step_id=step.id, order=2, duration_ms=6),),
        after_steps_ms=7,
        store_writes_ms=8,
        browser_close_ms=9,
    )
    run = Run(
        scenario_id=scenario.id,
        environment_id=environment.id,
        scenario_name="s",
        save_session=True,
        session_id=session.id,
        source_session_id=uuid.uuid4(),
        browser=scenario.browser,
        status=RunStatus.FAIL,
        error=RunError(kind=RunErrorKind.ASSERTION, message="no", step_id=step.id),
        step_results=(result,),
        artifacts=("step-2.png", "trace.zip"),
        created_at=when,
        started_at=when,
        finished_at=later,
        timings=timings,
        attempts=(
            RunAttempt(
                attempt=1,
                status=RunStatus.FAIL,
                error=RunError(kind=RunErrorKind.TIMEOUT, message="slow", step_id=step.id),
                step_results=(result,),
                started_at=when,
                finished_at=later,
            ),
        ),
        flaky=True,
        batch_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
    )
    entry = RunLogEntry(run_id=run.id, message="hello", level="warning", step_id=step.id, at=later, seq=1)
    for value in (environment, credential, snippet, scenario, session, run, entry):
        assert _every_field_set(value) == []
    async with store.unit_of_work() as uow:
        await uow.environments.add(environment)
        await uow.credentials.add(credential)
        await uow.snippets.add(snippet)
        await uow.scenarios.add(scenario)
        await uow.sessions.add(session)
        await uow.runs.add(run)
        await uow.runs.append_logs([attrs.evolve(entry, seq=None)])
        await uow.commit()
    async with store.unit_of_work() as uow:
        assert await uow.environments.get(environment.id) == environment
        assert await uow.credentials.get(credential.id) == credential
        assert await uow.snippets.get(snippet.id) == snippet
        assert await uow.scenarios.get(scenario.id) == scenario
        assert await uow.sessions.get(session.id) == session
        assert await uow.runs.get(run.id) == run
        (logged,) = (await uow.runs.list_logs(run.id, LogQuery())).items
    assert logged == attrs.evolve(entry, seq=logged.seq) and logged.seq is not None
