"""Typed application state: every ``web.AppKey`` of the server, with accessors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
from aiohttp import web

from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit.services import Services
from scenariokit.services.caller import Caller
from scenariokit_server.settings import Settings

if TYPE_CHECKING:
    from scenariokit_server.metrics import ServiceMetrics
    from scenariokit_server.views.health import BrowserFacts


@attrs.define
class Lifecycle:
    """Where the server is in its life: draining once a stop was asked for (docs/deployment.md)."""

    draining: bool = False


SETTINGS = web.AppKey("settings", Settings)
SERVICES = web.AppKey("services", Services)
SCHEDULER = web.AppKey("scheduler", Scheduler)
BROWSER_FACTS: web.AppKey[BrowserFacts] = web.AppKey("browser_facts")
#: who made a request: its door and token (set by :func:`scenariokit_server.access.authorize`)
CALLER = web.RequestKey("caller", Caller)
#: the request's id, answered in ``X-Request-Id`` and carried by its log lines
REQUEST_ID = web.RequestKey("request_id", str)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
METRICS: web.AppKey[ServiceMetrics] = web.AppKey("metrics")


def settings(app: web.Application) -> Settings:
    """The settings the application was created with."""
    return app[SETTINGS]


def services(request: web.Request) -> Services:
    """The application services a request handler calls."""
    return app_services(request.app)


def app_services(app: web.Application) -> Services:
    """The application services, for code that holds the app rather than a request (MCP tools)."""
    return app[SERVICES]


def caller(request: web.Request) -> Caller:
    """Who made ``request``: its door and the name and scope of its token (docs/deployment.md)."""
    return request.get(CALLER) or Caller(door="rest")
