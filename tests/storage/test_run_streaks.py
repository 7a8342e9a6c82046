"""A finished run's streak among the runs of its scenario against its environment, read from the store
and handed to ``scenariokit_run_finished``: the ground of alerting once per change of state."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from json_services import json_services
from scenariokit.domain.job import RunFinished
from scenariokit.domain.model import RunError, RunErrorKind, RunStreak, utcnow
from scenariokit.formats.inputs import RunInput
from scenariokit.plugins import get_plugin_manager, hookimpl
from scenariokit.services import Services
from scenariokit.storage.sqlalchemy import SqlStore


class Recorder:
    """Records each finished run's status and streak."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, RunStreak]] = []

    @hookimpl
    def scenariokit_run_finished(self, run: Any, scenario: Any, streak: RunStreak) -> None:
        self.seen.append((run.status.value, streak))


async def test_each_finished_run_gets_its_streak_per_environment(store: SqlStore) -> None:
    plugins = get_plugin_manager(load_entry_points=False)
    recorder = Recorder()
    plugins.register(recorder)
    services = json_services(Services(store, plugins=plugins))
    scenario = await services.scenarios.create({"name": "check"})
    here, there = [
        await services.environments.create({"name": name, "data": {"url": "http://127.0.0.1:9"}})
        for name in ("here", "there")
    ]
    began = utcnow()
    plan = [(here, "fail"), (there, "pass"), (here, "fail"), (here, "fail"), (there, "fail"), (here, "pass")]
    for i, (environment, status) in enumerate(plan):
        run = await services.runs.create(RunInput(scenario_id=scenario.id, environment_id=environment.id))
        at = began + timedelta(seconds=i)
        error = RunError(kind=RunErrorKind.ASSERTION, message="no") if status == "fail" else None
        outcome = RunFinished(status=status, error=error, step_results=(), started_at=at, finished_at=at)  # type: ignore[arg-type]
        await services.runs.finish(run.id, outcome)

    assert recorder.seen == [
        ("fail", RunStreak(failures=1, failures_before=0)),
        ("pass", RunStreak(failures=0, failures_before=0)),  # another environment: a streak of its own
        ("fail", RunStreak(failures=2, failures_before=1)),
        ("fail", RunStreak(failures=3, failures_before=2)),
        ("fail", RunStreak(failures=1, failures_before=0)),
        ("pass", RunStreak(failures=0, failures_before=3)),
    ]
