"""The worker pool running real scenarios in real Chromium against the demo site."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from scenariokit.domain.job import (
    ArtifactSaved,
    CredentialValue,
    LogEvent,
    RunEvent,
    RunFinished,
    RunJob,
    SessionReleased,
    SessionSaved,
    StepFinished,
    StepStarted,
)
from scenariokit.domain.model import RunErrorKind, StepResult, StepStatus
from scenariokit.runner.confinement.sandbox import SandboxConfig
from scenariokit.runner.parent.executor import WorkerPool

JobFactory = Callable[..., RunJob]
Runner = Callable[..., Awaitable[tuple[RunFinished, list[RunEvent]]]]
Starter = Callable[[RunJob], Awaitable["asyncio.Future[RunFinished]"]]

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

LOGIN = """
await page.goto(helpers.get_env_url("loginUrl"))
user = helpers.credentials["admin"]
await page.fill("#username", user.username)
await page.fill("#password", user["secret"])
await page.click("button[type=submit]")
await expect(page.locator("#status")).to_have_text("logged in")
"""

ADMIN = CredentialValue(alias="admin", username="alice", secret="pa55-w0rd-xyz")


def marked_sandbox() -> SandboxConfig:
    """The environment's sandbox settings, passing the browser marker (see conftest) to the workers."""
    return SandboxConfig.from_env(pass_env=("RUNNER_TEST_MARK",))


def logs(events: list[RunEvent]) -> list[str]:
    return [event.message for event in events if isinstance(event, LogEvent)]


def statuses(results: tuple[StepResult, ...]) -> list[StepStatus]:
    return [result.status for result in results]


async def test_passing_scenario_reads_environment_and_reports_each_step(
    run: Runner, make_job: JobFactory, site: str
) -> None:
    job = make_job(
        "await page.goto(helpers.getEnvUrl())\nprint('opened', page.url)",
        "await expect(page.locator('h1')).to_have_text(helpers.env['greeting'])\nlog('heading ok', 'debug')",
        "await page.goto(helpers.get_env_url('loginUrl'))\nassert await page.title() == 'Log in'",
    )

    outcome, events = await run(job)

    assert outcome.status == "pass", outcome.error
    assert outcome.error is None
    assert statuses(outcome.step_results) == [StepStatus.PASS] * 3
    assert [type(e).__name__ for e in events if isinstance(e, StepStarted | StepFinished)] == [
        "StepStarted",
        "StepFinished",
    ] * 3
    assert f"opened {site}/" in logs(events)
    debug = [e for e in events if isinstance(e, LogEvent) and e.message == "heading ok"]
    assert debug[0].level == "debug" and debug[0].step_id == job.steps[1].id
    assert events[-1] == outcome


async def test_failed_expect_records_message_and_screenshot_and_skips_the_rest(
    run: Runner, make_job: JobFactory
) -> None:
    job = make_job(
        "await page.goto(helpers.getEnvUrl())",
        "\nawait expect(page.locator('h1')).to_have_text('Goodbye', timeout=300)",
        "print('never runs')",
        trace="on-failure",
    )

    outcome, events = await run(job)

    assert outcome.status == "fail"
    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.ASSERTION
    assert outcome.error.step_id == job.steps[1].id
    assert "Goodbye" in outcome.error.message and "(line 2)" in outcome.error.message
    assert statuses(outcome.step_results) == [StepStatus.PASS, StepStatus.FAIL, StepStatus.SKIPPED]
    assert outcome.step_results[1].error == outcome.error.message
    assert ArtifactSaved(name="step-2.png") in events
    assert (job.artifacts_dir / "step-2.png").stat().st_size > 0
    assert ArtifactSaved(name="trace.zip") in events
    assert "never runs" not in logs(events)


async def test_snippet_gets_its_args_and_returns_a_value(run: Runner, make_job: JobFactory) -> None:
    job = make_job(
        "total = await runSnippet('add', [2, 3])\nassert total == 5, total\n"
        "title = await run_snippet('open_home')\nassert title == 'Demo', title",
        "await runSnippet('no_such_snippet')",
        snippets={
            "add": "return args[0] + args[1]",
            "open_home": "await page.goto(helpers.getEnvUrl())\nreturn await page.title()",
        },
    )

    outcome, _ = await run(job)

    assert statuses(outcome.step_results) == [StepStatus.PASS, StepStatus.FAIL]
    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.ERROR
    assert outcome.error.message == "LookupError: unknown snippet 'no_such_snippet' (line 1)"


async def test_credential_is_read_by_alias(run: Runner, make_job: JobFactory) -> None:
    outcome, _ = await run(make_job(LOGIN, credentials=(ADMIN,)))

    assert outcome.status == "pass", outcome.error


async def test_printed_and_raised_secrets_are_masked(run: Runner, make_job: JobFactory) -> None:
    job = make_job(
        "secret = helpers.credentials['admin'].secret\n"
        "print('the secret is', secret)\n"
        "log(f'again: {secret}!')",
        "raise RuntimeError('leaking ' + helpers.credentials['admin'].secret)",
        credentials=(ADMIN,),
    )

    outcome, events = await run(job)

    everything = "\n".join([*logs(events), *(r.error or "" for r in outcome.step_results)])
    assert ADMIN.secret not in everything
    assert "the secret is ***" in logs(events)
    assert "again: ***!" in logs(events)
    assert outcome.error is not None and outcome.error.message == "RuntimeError: leaking *** (line 1)"


async def test_syntax_error_is_reported_with_step_and_line_before_a_browser_starts(
    run: Runner, make_job: JobFactory
) -> None:
    job = make_job("print('fine')", "x = 1\nif x print(x)")

    started = time.monotonic()
    outcome, events = await run(job)

    assert time.monotonic() - started < 0.5
    assert not any(isinstance(event, StepStarted) for event in events)
    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.ERROR
    assert outcome.error.step_id == job.steps[1].id
    assert outcome.error.message.startswith('step 2 ("Step 2"): SyntaxError:')
    assert outcome.error.message.endswith("(line 2)")
    assert statuses(outcome.step_results) == [StepStatus.SKIPPED, StepStatus.FAIL]


async def test_scenario_without_steps_fails_with_nothing_to_run(run: Runner, make_job: JobFactory) -> None:
    outcome, _ = await run(make_job())

    assert outcome.status == "fail" and outcome.step_results == ()
    assert outcome.error is not None and outcome.error.message == "nothing to run: the scenario has no steps"


async def test_awaiting_step_is_stopped_at_its_limit(
    full_pool: WorkerPool, run: Runner, make_job: JobFactory
) -> None:
    # full_pool: a warm worker waits, so the clock measures the run, not a worker starting up
    job = make_job("import asyncio\nawait asyncio.sleep(100)", "print('skipped')", step_timeout=1)

    started = time.monotonic()
    outcome, events = await run(job)

    assert time.monotonic() - started < 30  # stopped at its limit, long before the 100 s sleep ends
    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.TIMEOUT
    assert outcome.error.message == 'step 1 ("Step 1") exceeded its time limit of 1 s'
    assert statuses(outcome.step_results) == [StepStatus.FAIL, StepStatus.SKIPPED]
    assert ArtifactSaved(name="step-1.png") in events


async def test_cpu_bound_step_is_killed_by_the_pool_and_the_worker_replaced(
    run: Runner, make_job: JobFactory, full_pool: WorkerPool
) -> None:
    pool = full_pool
    before = set(pool.worker_pids())
    job = make_job("print('spinning')", "while True:\n    pass", step_timeout=1)

    started = time.monotonic()
    outcome, events = await run(job)

    assert time.monotonic() - started < 30  # killed at its limit: an endless loop would never end
    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.TIMEOUT
    assert outcome.error.message == 'step 2 ("Step 2") exceeded its time limit of 1 s'
    assert statuses(outcome.step_results) == [StepStatus.PASS, StepStatus.FAIL]
    assert "spinning" in logs(events)
    again, _ = await run(make_job("print('still serving')"))
    assert again.status == "pass"
    assert set(pool.worker_pids()) != before


async def test_a_step_that_prints_without_pause_is_stopped_at_its_limit(
    run: Runner, make_job: JobFactory
) -> None:
    # Its lines never stop coming: the pool takes what has come without a timer for each, and its
    # deadline still ends the run.
    job = make_job(
        "import sys\nwhile True:\n    print('line')\n    sys.stdout.write('raw\\n')", step_timeout=1
    )

    started = time.monotonic()
    outcome, events = await run(job)

    assert time.monotonic() - started < 30
    assert outcome.error is not None and outcome.error.kind is RunErrorKind.TIMEOUT, outcome.error
    lines = logs(events)
    assert "line" in lines and "raw" in lines


async def test_whole_run_limit_applies_to_waiting_and_spinning_code(
    run: Runner, make_job: JobFactory
) -> None:
    waiting = make_job(*["import asyncio\nawait asyncio.sleep(0.6)"] * 3, timeout_seconds=1)
    spinning = make_job("while True:\n    pass", timeout_seconds=1)

    (waited, _), (spun, _) = await asyncio.gather(run(waiting), run(spinning))

    assert waited.error is not None and waited.error.kind is RunErrorKind.TIMEOUT
    assert waited.error.message == 'run exceeded its time limit of 1 s during step 2 ("Step 2")'
    assert statuses(waited.step_results) == [StepStatus.PASS, StepStatus.FAIL, StepStatus.SKIPPED]
    assert spun.error is not None and spun.error.kind is RunErrorKind.TIMEOUT
    assert spun.error.message == 'run exceeded its time limit of 1 s during step 1 ("Step 1")'


@pytest.mark.parametrize(
    ("death", "how"),
    [
        pytest.param("import os\nos._exit(3)", "exited with code 3", id="exit"),
        pytest.param("import ctypes\nctypes.string_at(0)", "exited with code -11 (SIGSEGV)", id="segfault"),
    ],
)
async def test_worker_that_dies_fails_the_run_and_is_replaced(
    run: Runner, make_job: JobFactory, death: str, how: str
) -> None:
    job = make_job("print('before')", "print('last words')\n" + death, "print('after')")

    outcome, events = await run(job)

    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.ERROR
    assert outcome.error.message == f'worker process {how} during step 2 ("Step 2")'
    # a line reaches the pool as it is printed: the one just before the death is in the log
    assert "last words" in logs(events)
    assert statuses(outcome.step_results) == [StepStatus.PASS, StepStatus.FAIL, StepStatus.SKIPPED]
    again, _ = await run(make_job("print('still serving')"))
    assert again.status == "pass"


async def test_worker_killed_by_sigkill_ends_its_run_as_worker_lost(
    run: Runner, make_job: JobFactory
) -> None:
    job = make_job("print('before')", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")

    outcome, _ = await run(job)

    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.WORKER_LOST
    assert outcome.error.message == 'worker process exited with code -9 (SIGKILL) during step 2 ("Step 2")'
    again, _ = await run(make_job("print('still serving')"))
    assert again.status == "pass"


CRASH_BROWSER = """
import os, signal
cdp = await browser.new_browser_cdp_session()
info = await cdp.send("SystemInfo.getProcessInfo")
browser_pid = next(p["id"] for p in info["processInfo"] if p["type"] == "browser")
os.kill(browser_pid, signal.SIGKILL)
await page.goto(helpers.getEnvUrl())
"""


@pytest.mark.parametrize(
    "crash",
    [
        pytest.param("await page.goto('chrome://crash')", id="page-crash"),
        pytest.param(CRASH_BROWSER, id="browser-killed"),
    ],
)
async def test_browser_crash_fails_the_run_and_the_pool_keeps_serving(
    run: Runner, make_job: JobFactory, crash: str
) -> None:
    outcome, _ = await run(make_job("await page.goto(helpers.getEnvUrl())", crash))

    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.ERROR
    assert outcome.error.step_id is not None
    assert statuses(outcome.step_results) == [StepStatus.PASS, StepStatus.FAIL]
    again, _ = await run(make_job("await page.goto(helpers.getEnvUrl())"))
    assert again.status == "pass"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import asyncio\nawait asyncio.sleep(30)", id="waiting"),
        pytest.param("while True: pass", id="spinning"),
    ],
)
async def test_cancel_stops_a_running_run_within_a_second(
    pool: WorkerPool, start_run: Starter, make_job: JobFactory, code: str
) -> None:
    job = make_job(code, "print('skipped')", step_timeout=30)
    execution = await start_run(job)
    asked = time.monotonic()
    assert await pool.cancel(job.run_id)
    outcome = await execution

    assert time.monotonic() - asked < 1.5  # 0.75 s to stop by itself, then the kill; room for load
    assert outcome.error is not None
    assert outcome.error.kind is RunErrorKind.CANCELLED
    assert outcome.error.message == 'run cancelled during step 1 ("Step 1")'
    assert statuses(outcome.step_results) == [StepStatus.FAIL, StepStatus.SKIPPED]
    assert not await pool.cancel(job.run_id)


async def test_a_run_abandoned_as_its_events_arrive_stops_at_once(
    pool: WorkerPool, make_job: JobFactory
) -> None:
    """Cancelling the task that executes a run (a scheduler stopping) abandons the run, even when the
    cancel comes just as the worker's events arrive: Python 3.11's ``wait_for`` returned the event
    then and dropped the cancel, so the run went on to its time limit (a drain cut short did not)."""
    job = make_job("import asyncio\nwhile True:\n    print('line')\n    await asyncio.sleep(0.001)",
                   step_timeout=30)  # fmt: skip
    loop = asyncio.get_running_loop()
    lines = 0

    async def on_event(event: RunEvent) -> None:
        nonlocal lines
        if isinstance(event, LogEvent):
            lines += 1
            if lines == 1:
                await asyncio.sleep(0.3)  # lines pile up in the run's inbox meanwhile
                loop.call_soon(execution.cancel)  # lands as the next line is taken from the inbox

    execution = asyncio.ensure_future(pool.execute(job, on_event))
    asked = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(20):
            await execution
    assert time.monotonic() - asked < 15, "the run went on after it was abandoned"
    assert lines >= 1
    await pool.retired()  # its worker was killed


async def test_cancel_of_a_queued_run_ends_it_before_any_step(
    full_pool: WorkerPool, make_job: JobFactory
) -> None:
    pool = full_pool
    busy = [make_job("import asyncio\nawait asyncio.sleep(30)") for _ in range(pool.size)]
    started = asyncio.Semaphore(0)
    queued_events: list[RunEvent] = []

    async def on_busy_event(event: RunEvent) -> None:
        if isinstance(event, StepStarted):
            started.release()

    async def on_queued_event(event: RunEvent) -> None:
        queued_events.append(event)

    running = [asyncio.ensure_future(pool.execute(job, on_busy_event)) for job in busy]
    for _ in busy:
        await asyncio.wait_for(started.acquire(), 10)
    queued = make_job("print('never runs')")
    waiting = asyncio.ensure_future(pool.execute(queued, on_queued_event))
    await asyncio.sleep(0.1)

    assert await pool.cancel(queued.run_id)
    outcome = await asyncio.wait_for(waiting, 1)

    assert outcome.error is not None and outcome.error.kind is RunErrorKind.CANCELLED
    assert outcome.error.message == 'run cancelled before step 1 ("Step 1")'
    assert not any(isinstance(event, StepStarted) for event in queued_events)
    for job in busy:
        assert await pool.cancel(job.run_id)
    assert {outcome.error.kind for outcome in await asyncio.gather(*running) if outcome.error} == {
        RunErrorKind.CANCELLED
    }


async def test_runs_beyond_the_pool_size_wait_for_a_free_worker(
    full_pool: WorkerPool, make_job: JobFactory
) -> None:
    pool = full_pool
    running = 0
    most = 0

    async def on_event(event: RunEvent) -> None:
        nonlocal running, most
        if isinstance(event, StepStarted):
            running += 1
            most = max(most, running)
        elif isinstance(event, StepFinished):
            running -= 1

    jobs = [make_job("import asyncio\nawait asyncio.sleep(1)") for _ in range(pool.size + 1)]
    outcomes = await asyncio.gather(*(pool.execute(job, on_event) for job in jobs))

    assert [outcome.status for outcome in outcomes] == ["pass"] * len(jobs)
    assert most == pool.size


async def test_saved_session_is_held_and_a_later_run_starts_logged_in(
    pool: WorkerPool, run: Runner, make_job: JobFactory, released_sessions: list[SessionReleased]
) -> None:
    login = make_job(LOGIN, credentials=(ADMIN,), save_session=True)

    outcome, events = await run(login)

    assert outcome.status == "pass", outcome.error
    saved = next(event for event in events if isinstance(event, SessionSaved))
    assert events.index(saved) < events.index(outcome)
    assert saved.token == "tok-alice-0123456789"
    origins = {origin["origin"]: origin for origin in saved.storage_state["origins"]}
    assert any(item["name"] == "token" for origin in origins.values() for item in origin["localStorage"])
    assert any(cookie["name"] == "sessionid" for cookie in saved.storage_state["cookies"])
    assert login.run_id in pool.held_sessions()

    reuse = make_job(
        "await page.goto(helpers.getEnvUrl())\n"
        "await expect(page.locator('#status')).to_have_text('logged in')",
        storage_state=saved.storage_state,
    )
    reused, _ = await run(reuse)
    assert reused.status == "pass", reused.error

    assert await pool.release_session(login.run_id)
    assert SessionReleased(run_id=login.run_id, reason="released") in released_sessions
    assert login.run_id not in pool.held_sessions()
    assert not await pool.release_session(login.run_id)


async def test_trace_is_saved_when_asked(run: Runner, make_job: JobFactory, tmp_path: Path) -> None:
    always = make_job("await page.goto(helpers.getEnvUrl())", trace="always", artifacts_dir=tmp_path / "a")
    on_failure = make_job(
        "await page.goto(helpers.getEnvUrl())", trace="on-failure", artifacts_dir=tmp_path / "b"
    )

    (kept, kept_events), (passed, passed_events) = await asyncio.gather(run(always), run(on_failure))

    assert kept.status == passed.status == "pass"
    assert ArtifactSaved(name="trace.zip") in kept_events
    assert (tmp_path / "a" / "trace.zip").read_bytes()[:2] == b"PK"
    assert not any(isinstance(event, ArtifactSaved) for event in passed_events)
    assert not (tmp_path / "b" / "trace.zip").exists()


async def test_a_run_with_linked_credentials_is_traced_only_when_asked_explicitly(
    run: Runner, make_job: JobFactory, tmp_path: Path
) -> None:
    failing = "await page.goto(helpers.getEnvUrl())\nassert False, 'fails'"
    on_failure = make_job(failing, credentials=(ADMIN,), trace="on-failure", artifacts_dir=tmp_path / "a")
    always = make_job(failing, credentials=(ADMIN,), trace="always", artifacts_dir=tmp_path / "b")

    (skipped, skipped_events), (kept, kept_events) = await asyncio.gather(run(on_failure), run(always))

    assert skipped.status == kept.status == "fail"
    assert ArtifactSaved(name="trace.zip") not in skipped_events
    assert any("no trace: the run uses linked credentials" in line for line in logs(skipped_events))
    assert ArtifactSaved(name="trace.zip") in kept_events
    assert (tmp_path / "b" / "trace.zip").read_bytes()[:2] == b"PK"


async def test_closing_a_pool_leaves_no_browser_behind_and_sessions_expire(
    run: Runner,
    make_job: JobFactory,
    browsers_started_by: Callable[[int], set[int]],
    wait_until_gone: Callable[[set[int]], set[int]],
) -> None:
    released: list[SessionReleased] = []

    async def remember(event: SessionReleased) -> None:
        released.append(event)

    expiring = WorkerPool(1, session_keepalive=0.5, on_session_released=remember, sandbox=marked_sandbox())
    await expiring.start()
    try:
        first = make_job("await page.goto(helpers.getEnvUrl())", save_session=True)
        await run(first, expiring)
        for _ in range(50):
            if released:
                break
            await asyncio.sleep(0.1)
        assert released == [SessionReleased(run_id=first.run_id, reason="expired")]
    finally:
        await expiring.close()

    # A keep-alive no loaded machine outlasts, so only closing the pool can release this one.
    holding = WorkerPool(1, session_keepalive=600, on_session_released=remember, sandbox=marked_sandbox())
    await holding.start()
    try:
        held = make_job("await page.goto(helpers.getEnvUrl())", save_session=True)
        await run(held, holding)
        assert holding.held_sessions() == [held.run_id]
        # the worker holding the session, and the warm one waiting for the next run
        browsers = set().union(*(browsers_started_by(worker) for worker in holding.worker_pids()))
        assert browsers, "the held session's browser and the warm worker's should be running"
    finally:
        await holding.close()

    assert wait_until_gone(browsers) == set()
    assert SessionReleased(run_id=held.run_id, reason="worker stopped") in released
