"""scenariokit-webhooks: POST a signed JSON summary of every finished run to your URLs.

Configured by environment variables, read when the service (or a kit, or a worker) loads its plugins;
without ``SCENARIOKIT_WEBHOOK_URLS`` the plugin registers no hook at all (see README.md):
``SCENARIOKIT_WEBHOOK_URLS`` (comma-separated; none means the plugin does nothing),
``SCENARIOKIT_WEBHOOK_SECRET`` (the HMAC-SHA256 key), ``SCENARIOKIT_WEBHOOK_TIMEOUT`` (seconds per
request, default 5), ``SCENARIOKIT_WEBHOOK_ATTEMPTS`` (default 3) and ``SCENARIOKIT_WEBHOOK_BACKOFF``
(seconds before the first retry, default 1, doubling); ``SCENARIOKIT_WEBHOOK_ALERTS`` (``every`` run,
the default, or only ``changes`` of state) and ``SCENARIOKIT_WEBHOOK_FAILURES`` (the failures in a row
that make a check failing, default 1).

The hook is called on the scheduler's event loop, so delivery happens on a thread of its own per URL:
the loop never waits for a receiver, and a receiver that is down, slow or failing never fails a run.
The threads are not daemons, so a process that ends right after a run still delivers (within the
bounded attempts).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

from scenariokit import Run, RunStatus, Scenario, hookimpl
from scenariokit.domain.model import RunStreak

if TYPE_CHECKING:  # only the plugin manager's type: scenariokit brings pluggy, this plugin does not name it
    import pluggy

__all__ = [
    "WebhookConfig",
    "Webhooks",
    "deliver",
    "notify",
    "run_summary",
    "sign",
    "state_change",
]

log = logging.getLogger("scenariokit_webhooks")

SIGNATURE_HEADER = "X-Scenariokit-Signature"
TIMESTAMP_HEADER = "X-Scenariokit-Timestamp"
EVENT = "run.finished"
#: the state-change events (``SCENARIOKIT_WEBHOOK_ALERTS=changes``)
FAILING = "check.failing"
RECOVERED = "check.recovered"
ALERT_MODES = ("every", "changes")
USER_AGENT = "scenariokit-webhooks/0.1"


def _number(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        log.warning("%s=%r is not a positive number; using %s", name, raw, default)
        return default
    return value


@attrs.frozen
class WebhookConfig:
    """Where summaries go, how they are signed, and how hard delivery tries."""

    urls: tuple[str, ...] = ()
    secret: str | None = attrs.field(default=None, repr=False)
    timeout: float = 5.0
    attempts: int = 3
    backoff: float = 1.0
    #: ``every`` run is sent, or only ``changes`` of state (failing, recovered)
    alerts: str = "every"
    #: failed runs in a row that make a check failing
    failures: int = 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> WebhookConfig:
        """The configuration from ``SCENARIOKIT_WEBHOOK_*`` variables."""
        urls = tuple(u.strip() for u in environ.get("SCENARIOKIT_WEBHOOK_URLS", "").split(",") if u.strip())
        return cls(
            urls=urls,
            secret=environ.get("SCENARIOKIT_WEBHOOK_SECRET") or None,
            timeout=_number(environ, "SCENARIOKIT_WEBHOOK_TIMEOUT", 5.0),
            attempts=int(_number(environ, "SCENARIOKIT_WEBHOOK_ATTEMPTS", 3)),
            backoff=_number(environ, "SCENARIOKIT_WEBHOOK_BACKOFF", 1.0),
            alerts=_alerts(environ),
            failures=max(1, int(_number(environ, "SCENARIOKIT_WEBHOOK_FAILURES", 1))),
        )


def _alerts(environ: Mapping[str, str]) -> str:
    raw = environ.get("SCENARIOKIT_WEBHOOK_ALERTS", "").strip().lower() or "every"
    if raw not in ALERT_MODES:
        log.warning(
            "SCENARIOKIT_WEBHOOK_ALERTS=%r is not one of %s; using every", raw, ", ".join(ALERT_MODES)
        )
        return "every"
    return raw


def state_change(run: Run, streak: RunStreak, failures: int) -> str | None:
    """The event a run makes under ``changes`` alerts, or None: a check is *failing* once ``failures``
    runs in a row failed (the run that reaches the count alerts, the ones after it do not), and
    *recovered* when a run passes after such a streak."""
    if run.status is RunStatus.FAIL and streak.failures == failures:
        return FAILING
    if run.status is RunStatus.PASS and streak.failures_before >= failures:
        return RECOVERED
    return None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def run_summary(
    run: Run, scenario: Scenario, *, event: str = EVENT, streak: RunStreak | None = None
) -> dict[str, Any]:
    """The JSON summary of a finished run: ids, status, error, times and step counts (and its streak)."""
    counts = {"total": len(run.step_results), "pass": 0, "fail": 0, "skipped": 0}
    for result in run.step_results:
        counts[result.status.value] += 1
    error = run.error
    summary: dict[str, Any] = {
        "event": event,
        "run": {
            "id": str(run.id),
            "status": run.status.value,
            "environmentId": str(run.environment_id),
            "error": (
                {
                    "kind": error.kind.value,
                    "message": error.message,
                    "stepId": str(error.step_id) if error.step_id else None,
                }
                if error
                else None
            ),
            "createdAt": _iso(run.created_at),
            "startedAt": _iso(run.started_at),
            "finishedAt": _iso(run.finished_at),
            "durationMs": run.duration_ms,
            "steps": counts,
            "stepResults": [
                {"order": r.order, "title": r.title, "status": r.status.value, "durationMs": r.duration_ms}
                for r in run.step_results
            ],
        },
        "scenario": {"id": str(scenario.id), "name": scenario.name},
    }
    if streak is not None:
        summary["streak"] = {
            "consecutiveFailures": streak.failures,
            "failuresBefore": streak.failures_before,
        }
    return summary


def sign(body: bytes, secret: str, timestamp: str) -> str:
    """The signature header value: ``sha256=`` and the hex HMAC-SHA256 of ``timestamp.body``.

    The timestamp is signed with the body, so a receiver that refuses old timestamps also refuses a
    captured request replayed later.
    """
    message = timestamp.encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _request(
    url: str, body: bytes, config: WebhookConfig, delivery: str, event: str
) -> urllib.request.Request:
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Scenariokit-Event": event,
        "X-Scenariokit-Delivery": delivery,
        TIMESTAMP_HEADER: timestamp,
    }
    if config.secret:
        headers[SIGNATURE_HEADER] = sign(body, config.secret, timestamp)
    return urllib.request.Request(url, data=body, headers=headers, method="POST")


def deliver(url: str, body: bytes, config: WebhookConfig, event: str = EVENT) -> bool:
    """POST ``body`` to ``url``, retrying with backoff; True once a receiver answered 2xx.

    A connection error, a timeout, a 5xx or a 429 is retried; any other answer is final.
    Nothing is raised: a failed delivery is logged and given up.
    """
    delivery = str(uuid.uuid4())  # the same on every attempt, so a receiver can drop duplicates
    for attempt in range(1, config.attempts + 1):
        try:
            request = _request(url, body, config, delivery, event)
            with urllib.request.urlopen(request, timeout=config.timeout):
                return True
        except urllib.error.HTTPError as exc:
            retry = exc.code >= 500 or exc.code == 429
            why = f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:  # refused, reset, timed out; ValueError: a malformed URL
            retry = not isinstance(exc, ValueError)
            why = f"{type(exc).__name__}: {exc}"
        if not retry or attempt == config.attempts:
            log.warning("webhook %s: giving up after attempt %d: %s", url, attempt, why)
            return False
        log.info("webhook %s: attempt %d failed (%s); retrying", url, attempt, why)
        time.sleep(config.backoff * 2 ** (attempt - 1))
    return False


def send(
    run: Run,
    scenario: Scenario,
    config: WebhookConfig,
    *,
    event: str = EVENT,
    streak: RunStreak | None = None,
) -> list[threading.Thread]:
    """Start delivering the run's summary to every configured URL; returns the delivery threads."""
    body = json.dumps(run_summary(run, scenario, event=event, streak=streak), separators=(",", ":")).encode()
    threads = [
        threading.Thread(
            target=deliver, args=(url, body, config, event), name=f"scenariokit-webhook-{run.id}"
        )
        for url in config.urls
    ]
    for thread in threads:
        thread.start()
    return threads


def notify(run: Run, scenario: Scenario, streak: RunStreak, config: WebhookConfig) -> list[threading.Thread]:
    """Send the finished run's summary to the configured URLs in the background; the delivery threads.

    With ``SCENARIOKIT_WEBHOOK_ALERTS=changes`` only a change of state is sent: ``check.failing``
    once a check failed ``SCENARIOKIT_WEBHOOK_FAILURES`` times in a row, ``check.recovered`` when it
    passes again. The streak comes from the store, so it holds across every process running checks.
    """
    if config.alerts == "every":
        return send(run, scenario, config, streak=streak)
    event = state_change(run, streak, config.failures)
    return [] if event is None else send(run, scenario, config, event=event, streak=streak)


@attrs.frozen
class Webhooks:
    """The plugin's hook, registered with the configuration it was loaded with (:func:`notify`)."""

    config: WebhookConfig

    @hookimpl
    def scenariokit_run_finished(self, run: Run, scenario: Scenario, streak: RunStreak) -> None:
        notify(run, scenario, streak, self.config)


@hookimpl
def scenariokit_plugins_loaded(plugins: pluggy.PluginManager) -> None:
    """Hear of finished runs only where ``SCENARIOKIT_WEBHOOK_URLS`` names a receiver: unconfigured, the
    plugin implements no run hook, and the scheduler reads no scenario and no streak for it."""
    config = WebhookConfig.from_env()
    if config.urls:
        plugins.register(Webhooks(config), name="scenariokit-webhooks.sender")
