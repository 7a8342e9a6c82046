"""scenariokit-webhooks against a real receiver on 127.0.0.1: signature, retries, timeout, a real run."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest
import pytest_asyncio
import scenariokit_webhooks
from aiohttp import web

import scenariokit
from scenariokit import Run, RunError, RunErrorKind, RunStatus, Scenario, Step, StepResult, StepStatus
from scenariokit.domain.job import RunFinished
from scenariokit.domain.model import RunStreak
from scenariokit.formats.inputs import RunInput
from scenariokit.plugins import HookRelay

SECRET = "webhook-test-secret"
#: ``configure(url, timeout=..., attempts=..., backoff=...)`` sets the plugin's variables
Configure = Callable[..., None]


class Receiver:
    """An HTTP endpoint that records every request and answers as planned: (status, delay) each."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.plan: list[tuple[int, float]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append((dict(request.headers), body))
        status, delay = self.plan.pop(0) if self.plan else (200, 0.0)
        await asyncio.sleep(delay)
        return web.Response(status=status)

    async def wait_for(self, count: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            assert time.monotonic() < deadline, f"{len(self.requests)} of {count} requests arrived"
            await asyncio.sleep(0.02)


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A receiver on a free port of 127.0.0.1."""
    served = Receiver()
    app = web.Application()
    app.router.add_post("/hook", served.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    served.url = f"http://127.0.0.1:{port}/hook"
    yield served
    await runner.cleanup()


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch) -> Configure:
    """Set the plugin's variables for one test (fast retries unless told otherwise)."""

    def set_up(url: str, **values: str) -> None:
        monkeypatch.setenv("SCENARIOKIT_WEBHOOK_URLS", url)
        monkeypatch.setenv("SCENARIOKIT_WEBHOOK_SECRET", SECRET)
        monkeypatch.setenv("SCENARIOKIT_WEBHOOK_BACKOFF", values.get("backoff", "0.05"))
        monkeypatch.setenv("SCENARIOKIT_WEBHOOK_TIMEOUT", values.get("timeout", "5"))
        monkeypatch.setenv("SCENARIOKIT_WEBHOOK_ATTEMPTS", values.get("attempts", "3"))

    return set_up


def finished_run() -> tuple[Run, Scenario]:
    """A failed run of a two-step scenario: step 1 passed, step 2 failed its assertion."""
    steps = (
        Step(exec_code="pass", order=1, title="open"),
        Step(exec_code="assert 0", order=2, title="check"),
    )
    scenario = Scenario(name="Checkout", steps=steps)
    started = datetime.now(UTC)
    run = Run(
        scenario_id=scenario.id,
        environment_id=uuid.uuid4(),
        scenario_name=scenario.name,
        status=RunStatus.FAIL,
        error=RunError(kind=RunErrorKind.ASSERTION, message="nope (line 1)", step_id=steps[1].id),
        step_results=(
            StepResult(step_id=steps[0].id, order=1, status=StepStatus.PASS, title="open", duration_ms=5),
            StepResult(step_id=steps[1].id, order=2, status=StepStatus.FAIL, title="check", duration_ms=7),
        ),
        started_at=started,
        finished_at=started + timedelta(milliseconds=1500),
    )
    return run, scenario


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_hook_run_finished_posts_a_signed_summary_without_blocking(
    receiver: Receiver, configure: Configure
) -> None:
    configure(receiver.url)
    receiver.plan = [(200, 2.0)]  # answers late: the hook must have returned long before
    run, scenario = finished_run()
    hook = scenariokit.get_plugin_manager().hook  # the plugin comes in through its entry point

    hook.scenariokit_run_finished(run=run, scenario=scenario, streak=RunStreak(failures=1))
    delivering = [t for t in threading.enumerate() if t.name == f"scenariokit-webhook-{run.id}"]
    assert delivering and delivering[0].is_alive(), "the hook must return while delivery goes on"

    await receiver.wait_for(1)
    headers, body = receiver.requests[0]
    timestamp = headers["X-Scenariokit-Timestamp"]
    signed = timestamp.encode() + b"." + body
    expected = "sha256=" + hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Scenariokit-Signature"], expected)
    assert abs(int(timestamp) - time.time()) < 300
    assert headers["X-Scenariokit-Event"] == "run.finished"
    summary = json.loads(body)
    assert summary["scenario"] == {"id": str(scenario.id), "name": "Checkout"}
    assert summary["run"]["id"] == str(run.id) and summary["run"]["status"] == "fail"
    assert summary["run"]["error"]["kind"] == "assertion" and summary["run"]["durationMs"] == 1500
    assert summary["run"]["steps"] == {"total": 2, "pass": 1, "fail": 1, "skipped": 0}


async def test_a_500_is_retried_with_the_same_body_and_delivery_id(
    receiver: Receiver, configure: Configure
) -> None:
    configure(receiver.url)
    receiver.plan = [(500, 0.0), (200, 0.0)]

    scenariokit_webhooks.notify(
        *finished_run(), RunStreak(failures=1), scenariokit_webhooks.WebhookConfig.from_env()
    )

    await receiver.wait_for(2)
    (first_headers, first_body), (second_headers, second_body) = receiver.requests
    assert first_body == second_body
    assert first_headers["X-Scenariokit-Delivery"] == second_headers["X-Scenariokit-Delivery"]
    await asyncio.sleep(0.3)
    assert len(receiver.requests) == 2, "a 2xx ends the delivery"


async def test_a_receiver_slower_than_the_timeout_is_given_up_and_retried(
    receiver: Receiver, configure: Configure
) -> None:
    configure(receiver.url, timeout="0.3")
    receiver.plan = [(200, 1.0), (200, 0.0)]
    config = scenariokit_webhooks.WebhookConfig.from_env()

    began = time.monotonic()
    (thread,) = scenariokit_webhooks.send(*finished_run(), config)
    await asyncio.to_thread(thread.join, 10)

    assert len(receiver.requests) == 2
    assert time.monotonic() - began < 1.0, "the slow first attempt was cut at the timeout"


async def test_a_receiver_that_is_down_is_given_up_after_the_attempts(configure: Configure) -> None:
    configure(f"http://127.0.0.1:{free_port()}/hook", attempts="2")
    config = scenariokit_webhooks.WebhookConfig.from_env()
    body = json.dumps(scenariokit_webhooks.run_summary(*finished_run())).encode()

    delivered = await asyncio.to_thread(scenariokit_webhooks.deliver, config.urls[0], body, config)

    assert delivered is False


def test_the_plugin_hears_of_runs_only_where_it_has_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCENARIOKIT_WEBHOOK_URLS", raising=False)
    unconfigured = HookRelay(scenariokit.get_plugin_manager())
    monkeypatch.setenv("SCENARIOKIT_WEBHOOK_URLS", "http://127.0.0.1:9/hook")
    configured = scenariokit.get_plugin_manager()

    # installed but unconfigured, it takes nothing: the scheduler reads no scenario and no streak for it
    assert not {"scenario", "streak"} & unconfigured.run_finished_takes
    (sender,) = [impl.plugin for impl in configured.hook.scenariokit_run_finished.get_hookimpls()]
    assert sender == scenariokit_webhooks.Webhooks(scenariokit_webhooks.WebhookConfig.from_env())
    assert {"scenario", "streak"} <= HookRelay(configured).run_finished_takes


def test_without_urls_the_plugin_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCENARIOKIT_WEBHOOK_URLS", raising=False)
    config = scenariokit_webhooks.WebhookConfig.from_env()

    assert config.urls == () and scenariokit_webhooks.send(*finished_run(), config) == []


@pytest.mark.browser
async def test_a_real_run_reports_to_the_receiver(
    receiver: Receiver, configure: Configure, tmp_path: Path
) -> None:
    configure(receiver.url)
    async with scenariokit.open_kit(
        f"sqlite:///{tmp_path}/kit.db", artifacts_dir=tmp_path / "artifacts"
    ) as kit:
        env = await kit.environments.create({"name": "local", "data": {"url": receiver.url}})
        scenario = await kit.scenarios.create({"name": "says hi", "steps": [{"execCode": "print('hi')"}]})
        result = await kit.run(scenario.id, environment_id=env.id, timeout=60)

    assert result.run.status is RunStatus.PASS, result.run.error
    await receiver.wait_for(1)
    summary = json.loads(receiver.requests[0][1])
    assert summary["run"]["id"] == str(result.run.id) and summary["run"]["status"] == "pass"
    assert summary["scenario"]["name"] == "says hi"


def test_a_state_change_is_told_once_per_change_with_a_failure_threshold() -> None:
    run, _ = finished_run()
    passed = attrs.evolve(run, status=RunStatus.PASS, error=None)
    statuses = ["fail", "fail", "fail", "pass", "pass", "fail", "fail", "fail", "pass"]
    events = []
    streak = RunStreak()
    for status in statuses:
        failed = status == "fail"
        streak = RunStreak(failures=streak.failures + 1 if failed else 0, failures_before=streak.failures)
        events.append(scenariokit_webhooks.state_change(run if failed else passed, streak, failures=2))
    assert events == [
        None,
        "check.failing",
        None,
        "check.recovered",
        None,
        None,
        "check.failing",
        None,
        "check.recovered",
    ]


async def test_changes_alerts_send_failing_once_and_recovered_once_from_the_stored_streak(
    receiver: Receiver, configure: Configure, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(receiver.url)
    monkeypatch.setenv("SCENARIOKIT_WEBHOOK_ALERTS", "changes")
    monkeypatch.setenv("SCENARIOKIT_WEBHOOK_FAILURES", "2")
    outcomes = ["fail", "fail", "fail", "fail", "pass", "pass", "fail"]
    async with scenariokit.open_kit(f"sqlite:///{tmp_path}/kit.db", artifacts_dir=tmp_path / "a") as kit:
        env = await kit.environments.create({"name": "site", "data": {"url": receiver.url}})
        scenario = await kit.scenarios.create({"name": "checkout"})
        finished = []
        for status in outcomes:  # as a scheduled check's fires would end, one after the other
            run = await kit.services.runs.create(RunInput(scenario_id=scenario.id, environment_id=env.id))
            now = datetime.now(UTC)
            error = RunError(kind=RunErrorKind.ASSERTION, message="down") if status == "fail" else None
            outcome = RunFinished(
                status=status, error=error, step_results=(), started_at=now, finished_at=now
            )
            finished.append(await kit.services.runs.finish(run.id, outcome))
    await receiver.wait_for(2)
    await asyncio.sleep(0.5)  # nothing more comes
    events = [(headers["X-Scenariokit-Event"], json.loads(body)) for headers, body in receiver.requests]
    assert [(event, body["run"]["id"]) for event, body in events] == [
        ("check.failing", str(finished[1].id)),
        ("check.recovered", str(finished[4].id)),
    ]
    assert events[0][1]["streak"] == {"consecutiveFailures": 2, "failuresBefore": 1}
    assert events[1][1]["streak"] == {"consecutiveFailures": 0, "failuresBefore": 4}
