"""Typed application state: every ``web.AppKey`` of the server, with accessors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit.services import Services
from scenariokit_server.settings import Settings

if TYPE_CHECKING:
    from scenariokit_server.views.health import BrowserFacts

SETTINGS = web.AppKey("settings", Settings)
SERVICES = web.AppKey("services", Services)
SCHEDULER = web.AppKey("scheduler", Scheduler)
BROWSER_FACTS: web.AppKey[BrowserFacts] = web.AppKey("browser_facts")


def settings(app: web.Application) -> Settings:
    """The settings the application was created with."""
    return app[SETTINGS]


def services(request: web.Request) -> Services:
    """The application services a request handler calls."""
    return app_services(request.app)


def app_services(app: web.Application) -> Services:
    """The application services, for code that holds the app rather than a request (MCP tools)."""
    return app[SERVICES]
