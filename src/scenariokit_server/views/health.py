"""``/health``: whether the service, its database and a browser for runs are there."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from aiohttp import web

from scenariokit.settings import Settings
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import operation

log = logging.getLogger(__name__)
PING_TIMEOUT_SECONDS = 5.0
#: How long /health reuses what it found of the browser: a poller every second looks once per period.
BROWSER_FACTS_SECONDS = 10.0


@functools.cache
def service_version() -> str:
    """The installed scenariokit version."""
    try:
        return version("scenariokit")
    except PackageNotFoundError:
        return "0+unknown"


def browser_status() -> str:
    """``"ok"`` when runs have a browser to use, else ``"missing"``."""
    try:
        from scenariokit.runner.worker.browser import browser_status as discover
    except ImportError:  # a library without the runner: look where discovery would
        configured = os.environ.get("SCENARIOKIT_BROWSER_PATH")
        found = (configured and os.access(configured, os.X_OK)) or shutil.which("chromium")
        return "ok" if found else "missing"
    return discover()


def sandbox_kind(app: web.Application, settings: Settings) -> str:
    """``"bubblewrap"`` or ``"none"``: what confines the workers (docs/security.md)."""
    from scenariokit.runner.confinement.sandbox import sandbox_status

    scheduler = app.get(keys.SCHEDULER)
    started = getattr(getattr(scheduler, "pool", None), "sandbox_kind", None)
    return started or sandbox_status(settings.sandbox)


def run_groups(app: web.Application) -> list[str]:
    """The controllers of each run's control group (``memory``, ``pids``); empty where there are none."""
    from scenariokit.runner.confinement.cgroups import available_controllers

    scheduler = app.get(keys.SCHEDULER)
    pool = getattr(scheduler, "pool", None)
    if pool is not None and getattr(pool, "sandbox_kind", None) is not None:  # started: what it has
        groups = pool.run_groups
        return list(groups.controllers) if groups is not None else []
    return list(available_controllers())


def left_out(app: web.Application, settings: Settings) -> list[str]:
    """What this machine could not give the workers, each in words (the pool's, once it started)."""
    from scenariokit.runner.confinement.sandbox import sandbox_fallback

    scheduler = app.get(keys.SCHEDULER)
    pool = getattr(scheduler, "pool", None)
    if pool is not None and getattr(pool, "sandbox_kind", None) is not None:
        return list(pool.left_out)
    fallback = sandbox_fallback(settings.sandbox)
    return [fallback] if fallback else []


def browser_build() -> str | None:
    """Which build runs use, with its version and path (see docs/deployment.md), or None."""
    try:
        from scenariokit.runner.worker.browser import browser_build as build
    except ImportError:
        return None
    return build()


class BrowserFacts:
    """``browser`` and ``browserBuild`` of /health, looked up (off the loop) at most once a period.

    Discovery walks the places a browser may be installed and stats it: little, but more than the rest
    of a health check, which load balancers and dashboards poll. A browser installed while the service
    runs shows within :data:`BROWSER_FACTS_SECONDS`. One per application.
    """

    def __init__(self) -> None:
        self._found: tuple[float, str, str | None] | None = None

    async def get(self) -> tuple[str, str | None]:
        now = time.monotonic()
        if self._found is None or now - self._found[0] > BROWSER_FACTS_SECONDS:
            status, build = await asyncio.to_thread(lambda: (browser_status(), browser_build()))
            self._found = (now, status, build)
        return self._found[1], self._found[2]


@operation(
    "health",
    "Liveness of the service, its database and the browser",
    description="503 with `database` `unreachable` and `status` `degraded` when the database "
    "does not answer; 503 with `status` `draining` once the server is stopping (a load balancer "
    "sends it nothing new).",
    response=schemas.Health,
    errors=(),
    other_responses={503: schemas.Health},
)
async def health(request: web.Request) -> web.Response:
    """200 when the database answers and the server is not stopping, 503 otherwise; says whether a
    browser was found."""
    body = await health_report(request.app)
    return web.json_response(body, status=200 if body["status"] == "ok" else 503)


async def health_report(app: web.Application) -> dict[str, Any]:
    """The health body: the database pinged, the browser found, the sandbox and control groups in use,
    and whether the server drains."""
    database = "ok"
    try:
        async with asyncio.timeout(PING_TIMEOUT_SECONDS):
            await keys.app_services(app).store.ping()
    except Exception as exc:  # any failure to answer is "unreachable"; the reason goes to the log
        log.warning("health: the database does not answer: %s: %s", type(exc).__name__, exc)
        database = "unreachable"
    browser, build = await app[keys.BROWSER_FACTS].get()
    draining = app[keys.LIFECYCLE].draining
    status = "draining" if draining else "ok" if database == "ok" else "degraded"
    return {
        "status": status,
        "version": service_version(),
        "database": database,
        "browser": browser,
        "sandbox": sandbox_kind(app, keys.settings(app)),
        "runGroups": run_groups(app),
        "leftOut": left_out(app, keys.settings(app)),
        "browserBuild": build,
    }
