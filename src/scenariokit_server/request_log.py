"""Each request's id and its line in the access log (docs/deployment.md, "Logs").

A request gets an id (the client's ``X-Request-Id`` when it is a short token of safe characters, else
a new one), answered in ``X-Request-Id`` and carried by every line logged while it is handled
(:func:`scenariokit.logs.about_request`). The access log writes one line per request with its method,
path (never the query string: a signed link's signature lives there), status and duration, as fields
of the JSON line with ``--log-format json``.
"""

from __future__ import annotations

import re
import uuid

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler

from scenariokit.logs import about_request
from scenariokit_server import keys

REQUEST_ID_HEADER = "X-Request-Id"
_GIVEN_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


@web.middleware
async def request_ids(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Name the request (see the module docstring) and log everything under it with that name."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    request_id = given if _GIVEN_ID.fullmatch(given) else uuid.uuid4().hex
    request[keys.REQUEST_ID] = request_id
    with about_request(request_id):
        return await handler(request)


async def answer_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every answer, a problem or a file included, names its request."""
    request_id = request.get(keys.REQUEST_ID)
    if request_id is not None:
        response.headers[REQUEST_ID_HEADER] = request_id


class RequestAccessLogger(AbstractAccessLogger):
    """One line per request, its fields also given as ``extra`` for the JSON log."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        remote = request.remote or "-"
        fields = {
            "requestId": request.get(keys.REQUEST_ID),
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "durationMs": round(time * 1000, 1),
            "remote": remote,
        }
        self.logger.info(
            '%s "%s %s" %d %.1fms', remote, request.method, request.path, response.status, time * 1000,
            extra=fields,
        )  # fmt: skip
