"""``/metrics``: the service's series in Prometheus text format (docs/deployment.md, "Metrics")."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from scenariokit_server import keys
from scenariokit_server.metrics import CONTENT_TYPE
from scenariokit_server.openapi import operation

log = logging.getLogger(__name__)
#: How long a scrape waits for the store before it answers without the store's series.
READOUT_TIMEOUT_SECONDS = 5.0


@operation(
    "health",
    "Prometheus metrics",
    description="Prometheus text format: runs by outcome, their durations, the queue, each scenario's "
    "last outcome, the schedules' lag, this process's workers and request durations by route "
    "template. The store's figures are read at each scrape; when the store does not answer, "
    "`scenariokit_store_up` is 0 and those series are left out.",
    response={"type": "string"},
    response_types=("text/plain",),
    errors=(),
)
async def metrics(request: web.Request) -> web.Response:
    """Every series of this application, the store's read now."""
    readout = None
    try:
        async with asyncio.timeout(READOUT_TIMEOUT_SECONDS):
            readout = await keys.services(request).operations.readout()
    except Exception as exc:  # the scrape still answers: store_up says what went wrong
        log.warning("metrics: the store does not answer: %s: %s", type(exc).__name__, exc)
    body = request.app[keys.METRICS].exposition(
        readout, request.app.get(keys.SCHEDULER), draining=request.app[keys.LIFECYCLE].draining
    )
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
