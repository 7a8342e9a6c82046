"""Runs through the whole stack: store → scheduler → worker processes → real Chromium → store."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from typing import Any as Site  # the site fixture (tests/integration/conftest.py)

import attrs
import pytest

import scenariokit
from scenariokit.domain.model import RunErrorKind, RunStatus, SessionStatus, StepStatus
from scenariokit.formats.presenters import session_json
from scenariokit.runner.parent import scheduler as scheduler_module

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]


async def _env(kit: scenariokit.Kit, site: Site) -> scenariokit.Environment:
    return await kit.environments.create({"name": "local", "data": {"url": site.url, "greeting": "Hello"}})


async def test_a_multi_step_scenario_passes_and_logs_what_it_printed(
    kit: scenariokit.Kit, site: Site
) -> None:
    env = await _env(kit, site)
    scenario = await kit.scenarios.create(
        {
            "name": "home",
            "steps": [
                {
                    "title": "open",
                    "execCode": "await page.goto(helpers.getEnvUrl())\nprint('opened', page.url)",
                },
                {"execCode": "await expect(page.get_by_text(helpers.env['greeting'])).to_be_visible()"},
                {"execCode": "log('done', level='warning')"},
            ],
        }
    )
    result = await kit.run(scenario.id, environment_id=env.id, timeout=60)
    assert result.run.status is RunStatus.PASS, result.run.error
    assert [r.status.value for r in result.run.step_results] == ["pass", "pass", "pass"]
    assert result.run.started_at and result.run.finished_at and result.run.duration_ms is not None
    messages = [(line.level, line.message) for line in result.logs.items]
    assert ("info", f"opened {site.url}") in messages and ("warning", "done") in messages
    found = await kit.logs(result.run.id, q="OPENED")
    assert [line.message for line in found.logs.items] == [f"opened {site.url}"]


async def test_a_scenario_without_steps_fails_with_nothing_to_run(kit: scenariokit.Kit, site: Site) -> None:
    env = await _env(kit, site)
    scenario = await kit.scenarios.create({"name": "empty"})
    result = await kit.run(scenario.id, environment_id=env.id, timeout=60)
    assert result.run.status is RunStatus.FAIL and result.run.step_results == ()
    assert result.run.error is not None and result.run.error.kind is RunErrorKind.ERROR
    assert result.run.error.message == "nothing to run: the scenario has no steps"


async def test_the_log_of_a_run_in_progress_shows_its_progress(kit: scenariokit.Kit, site: Site) -> None:
    env = await _env(kit, site)
    scenario = await kit.scenarios.create(
        {
            "name": "slow",
            "steps": [
                {"execCode": "import asyncio\nprint('first half')\nawait asyncio.sleep(2.5)\nprint('second')"}
            ],
        }
    )
    await kit.start_runner()
    run = await kit.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        detail = await kit.runs.get(run.id)
        if detail.logs and any(line.message == "first half" for line in detail.logs.items):
            break
        await asyncio.sleep(0.1)
    assert detail.run.status is RunStatus.IN_PROGRESS, "the log line must be readable before the run ends"
    finished = await kit.runs.wait(run.id, 30)
    assert finished.run.status is RunStatus.PASS


async def test_a_failed_expect_records_its_message_a_screenshot_and_skips_the_rest(
    kit: scenariokit.Kit, site: Site
) -> None:
    env = await _env(kit, site)
    scenario = await kit.scenarios.create(
        {
            "name": "fails",
            "steps": [
                {"execCode": "await page.goto(helpers.getEnvUrl())"},
                {"execCode": "await expect(page.get_by_text('Goodbye')).to_be_visible(timeout=300)"},
                {"execCode": "print('never')"},
            ],
        }
    )
    result = await kit.run(scenario.id, environment_id=env.id, timeout=60)
    run = result.run
    assert run.status is RunStatus.FAIL and run.error is not None
    assert run.error.kind is RunErrorKind.ASSERTION and "Goodbye" in run.error.message
    assert run.error.step_id == scenario.steps[1].id
    assert [r.status.value for r in run.step_results] == ["pass", "fail", "skipped"]
    assert "step-2.png" in run.artifacts
    path = await kit.runs.artifact(run.id, "step-2.png")
    assert path.read_bytes().startswith(b"\x89PNG")


async def test_a_linked_credential_is_readable_and_its_secret_never_logged(
    kit: scenariokit.Kit, site: Site
) -> None:
    env = await _env(kit, site)
    credential = await kit.credentials.create({"name": "admin", "username": "root", "secret": "s3cr3t-value"})
    scenario = await kit.scenarios.create(
        {
            "name": "secret",
            "credentials": [{"credentialId": str(credential.id), "alias": "admin"}],
            "steps": [
                {"execCode": "c = helpers.credentials['admin']\nprint(c.username, c.secret)"},
                {"execCode": "raise RuntimeError('bad password ' + helpers.credentials['admin'].secret)"},
            ],
        }
    )
    result = await kit.run(scenario.id, environment_id=env.id, timeout=60)
    messages = " ".join(line.message for line in result.logs.items)
    assert "root ***" in messages and "s3cr3t-value" not in messages
    assert result.run.error is not None and "***" in result.run.error.message
    assert "s3cr3t-value" not in result.run.error.message
    assert all("s3cr3t-value" not in (r.error or "") for r in result.run.step_results)


async def test_a_run_is_given_the_snippets_its_code_calls_and_names_the_nearest_of_the_rest(
    kit: scenariokit.Kit, site: Site
) -> None:
    env = await _env(kit, site)
    snippets = {
        "login": "await runSnippet('shout', [args[0]])\nreturn 'in as ' + args[0]",
        "shout": "log(args[0].upper())",
        "unrelated": "log('never called')",
    }
    for alias, code in snippets.items():
        await kit.snippets.create({"alias": alias, "title": alias, "code": code})
    calls = {
        "literal": "log(await runSnippet('login', ['ada']))",
        "computed": "log(await runSnippet('log' + 'in', ['bob']))",  # the run is given every snippet
        "typo": "await runSnippet('logn', ['ada'])",  # not stored: the run is given every snippet
    }
    results = {}
    for name, code in calls.items():
        scenario = await kit.scenarios.create({"name": name, "steps": [{"execCode": code}]})
        results[name] = await kit.run(scenario.id, environment_id=env.id, timeout=60)

    for name, user in (("literal", "ada"), ("computed", "bob")):
        run = results[name].run
        assert run.status is RunStatus.PASS, run.error
        messages = [line.message for line in results[name].logs.items]
        assert user.upper() in messages and f"in as {user}" in messages
    typo = results["typo"].run
    assert typo.status is RunStatus.FAIL and typo.error is not None
    assert typo.error.message == "LookupError: unknown snippet 'logn'; did you mean login? (line 1)"


async def test_a_running_run_is_cancelled_within_a_second(kit: scenariokit.Kit, site: Site) -> None:
    env = await _env(kit, site)
    scenario = await kit.scenarios.create(
        {
            "name": "long",
            "steps": [
                {
                    "execCode": "import asyncio\nprint('started')\nawait asyncio.sleep(60)",
                    "timeoutSeconds": 120,
                }
            ],
        }
    )
    await kit.start_runner()
    run = await kit.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    for _ in range(200):
        detail = await kit.runs.get(run.id)
        if detail.logs and detail.logs.total:
            break
        await asyncio.sleep(0.1)
    began = time.monotonic()
    await kit.runs.cancel(run.id)
    finished = await kit.runs.wait(run.id, 10, poll_seconds=0.05)
    assert time.monotonic() - began < 1.5
    assert finished.run.status is RunStatus.FAIL and finished.run.error is not None
    assert finished.run.error.kind is RunErrorKind.CANCELLED


async def test_save_session_keeps_the_login_for_a_second_run(kit: scenariokit.Kit, site: Site) -> None:
    env = await _env(kit, site)
    login = await kit.scenarios.create(
        {
            "name": "log in",
            "steps": [
                {
                    "execCode": "await page.goto(helpers.getEnvUrl() + 'login')\n"
                    "await page.fill('#user', 'ann')\nawait page.fill('#password', 'pw')\n"
                    "await page.click('#go')\nawait expect(page.locator('#status')).to_have_text('logged in')"
                }
            ],
        }
    )
    first = await kit.run(login.id, environment_id=env.id, save_session=True, timeout=60)
    assert first.run.status is RunStatus.PASS, first.run.error
    session = first.session
    assert (
        session is not None and session.name == f"run-{first.run.id}" and session.status is SessionStatus.OPEN
    )
    assert session.token == "tok-ann-0123456789"
    shown = session_json(kit.services.converter, session)
    assert shown["token"] == "tok-…6789" and "storageState" not in shown and "cookies" not in str(shown)

    home = await kit.scenarios.create(
        {
            "name": "home, logged in",
            "steps": [
                {
                    "execCode": "await page.goto(helpers.getEnvUrl())\n"
                    "await expect(page.locator('#status')).to_have_text('logged in')"
                }
            ],
        }
    )
    second = await kit.run(home.id, environment_id=env.id, session_id=session.id, timeout=60)
    assert second.run.status is RunStatus.PASS, second.run.error
    fresh = await kit.run(home.id, environment_id=env.id, timeout=60)
    assert fresh.run.status is RunStatus.FAIL, "without the session the page is logged out"

    await kit.sessions.delete(session.id)
    assert all(s.id != session.id for s in (await kit.sessions.list()).items)


async def test_a_finished_runs_log_holds_every_line_even_when_log_writes_are_slow(
    kit: scenariokit.Kit, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run ends while the periodic flush is writing a line: that line must not be lost."""
    write = kit.services.runs.record_progress

    async def slow_write(run_id: Any, entries: Any, step_results: Any = None) -> None:
        if any(entry.message == "slow line" for entry in entries):
            await asyncio.sleep(1.5)  # the step ends, and with it the run, during this write
        await write(run_id, entries, step_results)

    monkeypatch.setattr(kit.services.runs, "record_progress", slow_write)
    env = await _env(kit, site)
    # The flush every 0.25 s takes the line while the step still sleeps; the step ends mid-write.
    code = "import asyncio\nprint('slow line')\nawait asyncio.sleep(0.6)"
    scenario = await kit.scenarios.create({"name": "chatty", "steps": [{"execCode": code}]})

    result = await kit.run(scenario.id, environment_id=env.id, timeout=60)

    assert result.run.status is RunStatus.PASS, result.run.error
    assert [line.message for line in result.logs.items if line.level == "info"] == ["slow line"]


async def test_a_runs_slot_goes_to_the_next_run_before_its_last_write_ends(
    kit: scenariokit.Kit, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run ends while a write of its progress is under way: the next run is claimed meanwhile."""
    order: list[str] = []
    write, claim = kit.services.runs.record_progress, kit.services.runs.claim

    async def slow_write(run_id: Any, entries: Any, step_results: Any = None) -> None:
        await write(run_id, entries, step_results)
        if any(entry.message == "slow line" for entry in entries):
            await asyncio.sleep(2.0)  # the step ends, and with it the run, during this write
            order.append("the ended run's write")

    async def claiming(owner: str) -> Any:
        claimed = await claim(owner)
        if claimed is not None:
            order.append(f"claimed {claimed[0].scenario_id}")
        return claimed

    monkeypatch.setattr(kit.services.runs, "record_progress", slow_write)
    monkeypatch.setattr(kit.services.runs, "claim", claiming)
    await kit.start_runner()
    env = await _env(kit, site)
    chatty, waiting, last = [
        await kit.scenarios.create({"name": name, "steps": [{"execCode": code}]})
        for name, code in (
            ("chatty", "import asyncio\nprint('slow line')\nawait asyncio.sleep(0.6)"),
            ("holds the other slot", "import asyncio\nawait asyncio.sleep(5)"),
            ("next", "print('next')"),
        )
    ]
    runs = [
        await kit.runs.create({"scenarioId": str(s.id), "environmentId": str(env.id)})
        for s in (chatty, waiting)
    ]
    while len(order) < 2:  # both slots taken before the next run is queued
        await asyncio.sleep(0.05)
    runs.append(await kit.runs.create({"scenarioId": str(last.id), "environmentId": str(env.id)}))

    ended = [await kit.services.runs.wait(run.id, 60) for run in runs]
    # the write's own end: on a loaded machine the first run's step may start seconds after the
    # other's, and its write (2 s) may still be under way when every run has ended
    async with asyncio.timeout(30):
        while "the ended run's write" not in order:
            await asyncio.sleep(0.05)

    assert [detail.run.status for detail in ended] == [RunStatus.PASS] * 3
    assert order.index(f"claimed {last.id}") < order.index("the ended run's write"), order


async def test_every_run_keeps_its_timeline_phase_by_phase(kit: scenariokit.Kit, site: Site) -> None:
    env = await _env(kit, site)
    scenario = await kit.scenarios.create(
        {
            "name": "timed",
            "steps": [
                {"execCode": "await page.goto(helpers.getEnvUrl())"},
                {"execCode": "await expect(page.get_by_text(helpers.env['greeting'])).to_be_visible()"},
                {"execCode": "assert False, 'stop here'"},
                {"execCode": "log('never')"},
            ],
        }
    )
    result = await kit.run(scenario.id, environment_id=env.id, timeout=60)
    timings = result.run.timings

    assert result.run.status is RunStatus.FAIL and timings is not None
    phases = attrs.asdict(timings, recurse=False)
    del phases["steps"], phases["browser_close_ms"]  # the browser closes after the outcome is stored
    assert all(isinstance(ms, int) and ms >= 0 for ms in phases.values()), phases
    ran = [r for r in result.run.step_results if r.status is not StepStatus.SKIPPED]
    assert [(t.step_id, t.order) for t in timings.steps] == [(r.step_id, r.order) for r in ran]
    assert [t.duration_ms for t in timings.steps] == [r.duration_ms for r in ran]
    assert len(timings.steps) == 3 and all(t.duration_ms >= 0 for t in timings.steps)

    deadline = time.monotonic() + 30
    while (closed := (await kit.runs.get(result.run.id)).run.timings) and closed.browser_close_ms is None:
        assert time.monotonic() < deadline, "the browser close never reached the run's timings"
        await asyncio.sleep(0.1)
    assert closed is not None and closed.browser_close_ms is not None and closed.browser_close_ms >= 0
    # the close adds to the timings and changes nothing else
    assert attrs.evolve(closed, browser_close_ms=None) == attrs.evolve(timings, browser_close_ms=None)


async def test_a_run_writes_its_steps_and_lines_with_its_outcome_not_one_write_each(
    kit: scenariokit.Kit, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No flush falls inside this run: its steps' results and its lines go in with its outcome, at once."""
    monkeypatch.setattr(scheduler_module, "LOG_FLUSH_SECONDS", 3600.0)
    runs = kit.services.runs
    calls: dict[str, list[Any]] = {"record_progress": [], "append_logs": [], "finish": []}
    for name, seen in calls.items():
        original = getattr(runs, name)

        async def spy(*args: Any, _seen: list[Any] = seen, _call: Any = original, **kwargs: Any) -> Any:
            _seen.append((args, kwargs))
            return await _call(*args, **kwargs)

        monkeypatch.setattr(runs, name, spy)
    env = await _env(kit, site)
    code = ["print('one')", "print('two')", "await page.goto(helpers.getEnvUrl())\nprint('three')"]
    scenario = await kit.scenarios.create({"name": "quiet", "steps": [{"execCode": c} for c in code]})

    result = await kit.run(scenario.id, environment_id=env.id, timeout=60)

    assert result.run.status is RunStatus.PASS, result.run.error
    assert [step.status for step in result.run.step_results] == [StepStatus.PASS] * 3
    assert [line.message for line in result.logs.items if line.level == "info"] == ["one", "two", "three"]
    assert (len(calls["record_progress"]), len(calls["append_logs"])) == (0, 0)
    [(_, finished)] = calls["finish"]
    assert [entry.message for entry in finished["logs"] if entry.level == "info"] == ["one", "two", "three"]
