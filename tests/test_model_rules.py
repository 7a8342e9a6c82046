"""Domain rules that need no store: the whole-run time limit a scenario gets."""

from __future__ import annotations

import uuid

from scenariokit.domain.model import DEFAULT_STEP_TIMEOUT_SECONDS, Scenario, Step
from scenariokit.runner.job import RunJob, StepJob


def test_a_scenario_limit_wins_over_its_steps() -> None:
    scenario = Scenario(name="s", timeout_seconds=12, steps=(Step(exec_code="pass", timeout_seconds=100),))

    assert scenario.run_timeout == 12


def test_without_a_scenario_limit_the_steps_limits_add_up_defaults_included() -> None:
    steps = (Step(exec_code="pass", order=1, timeout_seconds=5), Step(exec_code="pass", order=2))

    assert Scenario(name="s", steps=steps).run_timeout == 5 + DEFAULT_STEP_TIMEOUT_SECONDS


def test_an_empty_scenario_is_still_bounded() -> None:
    assert Scenario(name="s").run_timeout == DEFAULT_STEP_TIMEOUT_SECONDS


def test_the_runner_job_applies_the_same_rule() -> None:
    scenario = Scenario(name="s", steps=(Step(exec_code="pass", timeout_seconds=7),))
    job = RunJob(
        run_id=uuid.uuid4(),
        scenario_id=scenario.id,
        scenario_name=scenario.name,
        steps=tuple(
            StepJob(id=s.id, order=s.order, title=s.title, exec_code=s.exec_code, timeout_seconds=7)
            for s in scenario.steps
        ),
        env_name="local",
        env_data={},
    )

    assert job.run_timeout == scenario.run_timeout == 7
