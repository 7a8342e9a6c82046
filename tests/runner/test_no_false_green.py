"""No false green (CONTRACT §20): a check that did nothing never passes, in real Chromium.

A coroutine step code makes and never awaits fails its step naming the line and the call; code that
awaits later, gathers or awaits its tasks stays green; a scenario with nothing to run fails; unknown
names suggest the near ones; the run log names step lines, never a file of the installed service.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import pytest

from scenariokit.domain.job import LogEvent, RunEvent, RunFinished, RunJob
from scenariokit.domain.model import RunErrorKind, StepStatus
from scenariokit.runner.parent.executor import WorkerPool

JobFactory = Callable[..., RunJob]
Runner = Callable[..., Awaitable[tuple[RunFinished, list[RunEvent]]]]
Starter = Callable[[RunJob], Awaitable["asyncio.Future[RunFinished]"]]

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

#: a path of a Python file, as a traceback or a warning names one
PYTHON_FILE = re.compile(r"[\w/.-]+\.py\b")


def log_lines(events: list[RunEvent]) -> list[str]:
    return [event.message for event in events if isinstance(event, LogEvent)]


def assert_no_server_paths(events: list[RunEvent]) -> None:
    for line in log_lines(events):
        assert not PYTHON_FILE.search(line), line
        assert "scenariokit" not in line, line


def error_of(outcome: RunFinished) -> tuple[RunErrorKind, str]:
    assert outcome.status == "fail", outcome
    assert outcome.error is not None
    return outcome.error.kind, outcome.error.message


async def test_an_unawaited_expect_fails_its_step_naming_the_line_and_the_call(
    run: Runner, make_job: JobFactory
) -> None:
    job = make_job(
        "await page.goto(helpers.getEnvUrl())\nexpect(page.locator('h1')).to_have_text('WRONG TEXT')",
        "log('never runs')",
    )

    outcome, events = await run(job)

    assert error_of(outcome) == (
        RunErrorKind.ERROR,
        "line 2: expect(page.locator('h1')).to_have_text('WRONG TEXT') was never awaited; add await",
    )
    assert [r.status for r in outcome.step_results] == [StepStatus.FAIL, StepStatus.SKIPPED]
    assert outcome.error.step_id == job.steps[0].id
    assert_no_server_paths(events)


async def test_an_unawaited_goto_fails_and_the_log_names_no_file_of_the_service(
    run: Runner, make_job: JobFactory
) -> None:
    outcome, events = await run(make_job("log('start')\npage.goto(helpers.getEnvUrl())"))

    assert error_of(outcome) == (
        RunErrorKind.ERROR,
        "line 2: page.goto(helpers.getEnvUrl()) was never awaited; add await",
    )
    assert_no_server_paths(events)


async def test_a_coroutine_dropped_inside_a_snippet_names_the_step_line_and_the_snippet_line(
    run: Runner, make_job: JobFactory
) -> None:
    job = make_job(
        "log('first')\nawait runSnippet('open')",
        snippets={"open": "url = helpers.getEnvUrl()\npage.goto(url)\nreturn url"},
    )

    outcome, events = await run(job)

    assert error_of(outcome) == (
        RunErrorKind.ERROR,
        "line 2: page.goto(url) was never awaited; add await (in snippet 'open' line 2)",
    )
    assert_no_server_paths(events)


async def test_run_snippet_without_await_fails(run: Runner, make_job: JobFactory) -> None:
    job = make_job("runSnippet('add', [1, 2])", snippets={"add": "return args[0] + args[1]"})

    outcome, _ = await run(job)

    assert error_of(outcome) == (
        RunErrorKind.ERROR,
        "line 1: runSnippet('add', [1, 2]) was never awaited; add await",
    )


async def test_a_coroutine_kept_in_a_name_and_never_awaited_fails_its_step(
    run: Runner, make_job: JobFactory
) -> None:
    outcome, events = await run(make_job("pending = page.goto(helpers.getEnvUrl())\nlog('done')"))

    assert error_of(outcome) == (
        RunErrorKind.ERROR,
        "line 1: page.goto(helpers.getEnvUrl()) was never awaited; add await",
    )
    assert_no_server_paths(events)


async def test_a_coroutine_dropped_in_a_reference_cycle_fails_its_step(
    run: Runner, make_job: JobFactory
) -> None:
    code = "def drop():\n    box = {}\n    box['self'] = box\n    box['call'] = page.reload()\ndrop()\n"

    outcome, events = await run(make_job(code))

    assert error_of(outcome) == (RunErrorKind.ERROR, "line 4: page.reload() was never awaited; add await")
    assert_no_server_paths(events)


async def test_a_dropped_coroutine_wins_over_the_failure_it_caused(run: Runner, make_job: JobFactory) -> None:
    code = (
        "page.goto(helpers.getEnvUrl())\n"
        "await expect(page.locator('h1')).to_have_text('Welcome', timeout=500)"
    )

    outcome, events = await run(make_job(code))

    assert error_of(outcome) == (
        RunErrorKind.ERROR,
        "line 1: page.goto(helpers.getEnvUrl()) was never awaited; add await",
    )
    assert any(line.startswith('step 1 ("Step 1") also failed: ') for line in log_lines(events))


async def test_a_dropped_coroutine_wins_over_the_time_limit_it_made_the_step_wait_out(
    run: Runner, make_job: JobFactory
) -> None:
    # the page never loads, so the click waits for its button until the step's limit stops it
    code = "page.goto(helpers.getEnvUrl())\nawait page.click('#sign-in')"

    outcome, events = await run(make_job(code, step_timeout=1.5))

    assert error_of(outcome) == (
        RunErrorKind.ERROR,
        "line 1: page.goto(helpers.getEnvUrl()) was never awaited; add await",
    )
    # the time limit's own message names the step; the log line names it once
    assert 'step 1 ("Step 1") also failed: exceeded its time limit of 1.5 s' in log_lines(events)
    assert [r.status for r in outcome.step_results] == [StepStatus.FAIL]


async def test_a_cancelled_run_stays_cancelled_whatever_its_step_dropped(
    pool: WorkerPool, start_run: Starter, make_job: JobFactory
) -> None:
    job = make_job("page.goto(helpers.getEnvUrl())\nawait page.click('#sign-in')", step_timeout=30)
    running = await start_run(job)
    await asyncio.sleep(0.3)  # the dropped goto is behind it; the click waits
    assert await pool.cancel(job.run_id)
    outcome = await asyncio.wait_for(running, 30)

    assert error_of(outcome) == (RunErrorKind.CANCELLED, 'run cancelled during step 1 ("Step 1")')


async def test_awaiting_later_gathering_and_awaited_tasks_stay_green(
    run: Runner, make_job: JobFactory
) -> None:
    job = make_job(
        # awaited later in the same step
        "going = page.goto(helpers.getEnvUrl())\nlog('before')\nawait going",
        # gathered
        "import asyncio\ntitle, count = await asyncio.gather(page.title(), page.locator('h1').count())\n"
        "assert (title, count) == ('Demo', 1), (title, count)",
        # a task made and awaited, and one awaited through asyncio.wait_for
        "import asyncio\ntask = asyncio.create_task(page.reload())\nawait task\n"
        "await asyncio.wait_for(expect(page.locator('h1')).to_have_text('Welcome'), 10)",
        # a coroutine made in a function of the step and awaited by its caller
        "async def heading():\n    return await page.locator('h1').inner_text()\n"
        "assert await heading() == 'Welcome'",
    )

    outcome, events = await run(job)

    assert outcome.status == "pass", outcome.error
    assert [r.status for r in outcome.step_results] == [StepStatus.PASS] * 4
    assert_no_server_paths(events)


async def test_a_warning_of_step_code_is_logged_against_the_step_line(
    run: Runner, make_job: JobFactory
) -> None:
    job = make_job("log('one')", "import warnings\n\nwarnings.warn('careful now')")

    outcome, events = await run(job)

    assert outcome.status == "pass", outcome.error
    assert "<step 2>:3: UserWarning: careful now" in log_lines(events)
    assert_no_server_paths(events)


async def test_an_error_of_a_task_nobody_awaited_is_logged_against_the_step_line(
    run: Runner, make_job: JobFactory
) -> None:
    code = (
        "import asyncio, gc\n"
        "async def boom():\n"
        "    raise ValueError('lost')\n"
        "task = asyncio.ensure_future(boom())\n"
        "await asyncio.sleep(0.05)\n"
        "del task\n"
        "gc.collect()\n"
    )

    outcome, events = await run(make_job(code))

    assert outcome.status == "pass", outcome.error
    assert "<step 1>:3: Task exception was never retrieved: ValueError: lost" in log_lines(events)
    assert_no_server_paths(events)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ((), "nothing to run: the scenario has no steps"),
        (("# only a comment\n\n", "   \n"), "nothing to run: the scenario has no statements"),
    ],
)
async def test_a_scenario_with_nothing_to_run_fails_at_once(
    run: Runner, make_job: JobFactory, steps: tuple[str, ...], message: str
) -> None:
    outcome, events = await run(make_job(*steps))

    assert error_of(outcome) == (RunErrorKind.ERROR, message)
    assert all(r.status is StepStatus.SKIPPED for r in outcome.step_results)
    assert message in log_lines(events)


async def test_a_comment_step_beside_a_real_one_runs(run: Runner, make_job: JobFactory) -> None:
    outcome, _ = await run(make_job("# just notes", "log('real')"))

    assert outcome.status == "pass", outcome.error


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "await page.goto(helpers.getEnvURL())",
            "AttributeError: helpers has no attribute 'getEnvURL'; did you mean getEnvUrl? (line 1)",
        ),
        (
            "await runSnippet('ad', [1, 2])",
            "LookupError: unknown snippet 'ad'; did you mean add? (line 1)",
        ),
        (
            "log(helpers.env['greting'])",
            "UnknownEnvironmentKey: environment 'local' has no key 'greting'; "
            "did you mean greeting? (line 1)",
        ),
    ],
)
async def test_an_unknown_name_suggests_the_nearest_known_one(
    run: Runner, make_job: JobFactory, code: str, message: str
) -> None:
    outcome, _ = await run(make_job(code, snippets={"add": "return args[0] + args[1]"}))

    assert error_of(outcome) == (RunErrorKind.ERROR, message)
