"""``/api/v1/devices``: the device names a ``browser.device`` setting may take."""

from __future__ import annotations

from aiohttp import web

from scenariokit_server import keys, schemas
from scenariokit_server.openapi import operation
from scenariokit_server.views import ok


@operation(
    "devices",
    "List the devices Playwright knows",
    description="The names `browser.device` accepts on environments and scenarios (docs/browser.md).",
    response=schemas.Devices,
)
async def list_devices(request: web.Request) -> web.Response:
    """Every device name the installed Playwright knows, sorted."""
    names = await keys.services(request).devices.names()
    return ok({"items": names, "total": len(names)})
