"""Domain rules that need no store: run time limits, every broken field named, code that compiles,
the steps a run that ended did not reach."""

from __future__ import annotations

import uuid

import pytest

from scenariokit.domain.errors import ValidationError
from scenariokit.domain.job import RunJob, StepJob
from scenariokit.domain.model import (
    DEFAULT_STEP_TIMEOUT_SECONDS,
    FieldErrors,
    Scenario,
    Step,
    StepResult,
    StepStatus,
    skip_remaining,
)
from scenariokit.formats.convert import make_converter, structure_input
from scenariokit.formats.inputs import ScenarioInput, SnippetInput, StepInput


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


# --- every broken rule is named; code must compile ---------------------------------------------


def test_every_broken_field_of_one_object_is_named_together() -> None:
    with pytest.raises(FieldErrors) as refused:
        ScenarioInput(name=" ", timeout_seconds=0)

    assert refused.value.errors == {
        "name": "is required and must not be blank",
        "timeoutSeconds": "must be greater than 0 and at most 3600",
    }


def test_a_structured_input_reports_all_its_fields_under_their_json_paths() -> None:
    with pytest.raises(ValidationError) as refused:
        structure_input(make_converter(), {"alias": "1x", "title": "", "code": "return ("}, SnippetInput)

    assert set(refused.value.errors) == {"alias", "title", "code"}


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("await page.goto(", "'(' was never closed (line 1)"),
        ("x = 1\n  y = 2", "unexpected indent (line 2)"),
        ("return 5", "'return' outside function (line 1)"),
    ],
)
def test_step_code_that_does_not_compile_is_refused_naming_the_line(code: str, problem: str) -> None:
    with pytest.raises(FieldErrors) as refused:
        StepInput(exec_code=code)

    assert refused.value.errors == {"execCode": f"is not valid Python: {problem}"}


def test_step_code_may_await_at_the_top_level() -> None:
    assert StepInput(exec_code="await page.goto(helpers.getEnvUrl())\nlog('ok')").order is None


def test_snippet_code_is_a_function_body_so_it_may_return_and_await() -> None:
    SnippetInput(alias="sum", title="Sum", code="await page.wait_for_timeout(1)\nreturn sum(args)")

    with pytest.raises(FieldErrors, match=r"code: is not valid Python: invalid syntax \(line 2\)"):
        SnippetInput(alias="sum", title="Sum", code="x = 1\nreturn x +")


def test_stored_steps_load_without_being_compiled_the_runner_reports_them() -> None:
    """Code stored before this rule (or by other means) must stay readable; runs report its error."""
    assert Step(exec_code="await (").exec_code == "await ("


def test_whole_seconds_are_held_as_floats_so_a_write_answers_what_a_read_gives() -> None:
    scenario = Scenario(name="s", timeout_seconds=120, steps=(Step(exec_code="pass", timeout_seconds=5),))

    assert scenario.timeout_seconds == 120.0 and isinstance(scenario.timeout_seconds, float)
    assert isinstance(scenario.steps[0].timeout_seconds, float)
    with pytest.raises(FieldErrors, match="must be a number"):
        Scenario(name="s", timeout_seconds=True)  # type: ignore[arg-type]


def test_a_run_that_ended_skips_every_step_without_a_result_in_step_order() -> None:
    first, second, third = (Step(exec_code="pass", order=n, title=f"t{n}") for n in (1, 2, 3))
    failed = StepResult(step_id=second.id, order=2, status=StepStatus.FAIL, error="boom")
    passed = StepResult(step_id=first.id, order=1, status=StepStatus.PASS)

    results = skip_remaining((third, second, first), [failed, passed])

    assert results == (
        passed,
        failed,
        StepResult(step_id=third.id, order=3, status=StepStatus.SKIPPED, title="t3"),
    )


def test_the_job_steps_skip_alike_and_results_of_steps_gone_are_kept() -> None:
    """The worker's steps follow the same rule; a result of a step deleted meanwhile still happened."""
    job_step = StepJob(id=uuid.uuid4(), order=1, title=None, exec_code="pass", timeout_seconds=1)
    gone = StepResult(step_id=uuid.uuid4(), order=2, status=StepStatus.PASS)

    assert [r.status for r in skip_remaining([job_step], [])] == [StepStatus.SKIPPED]
    assert skip_remaining([], [gone]) == (gone,)
    assert [r.step_id for r in skip_remaining([job_step], [gone])] == [job_step.id, gone.step_id]
