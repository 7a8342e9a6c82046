"""Every error the server answers, as RFC 9457 problem details, from one middleware and one table."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from scenariokit.domain.errors import (
    AuthoringUnavailable,
    BrowserUnavailable,
    Conflict,
    Forbidden,
    NotFound,
    ScenarioKitError,
    SecretKeyError,
    SecretUnreadable,
    TooLarge,
    ValidationError,
)
from scenariokit_server.views import json_response

log = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"

#: The HTTP status of each domain error; a subclass takes the status of its nearest listed base.
STATUS_OF: dict[type[ScenarioKitError], int] = {
    ValidationError: 400,  # InvalidQuery included
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    BrowserUnavailable: 503,
    AuthoringUnavailable: 503,
    SecretUnreadable: 503,  # the server's keys, not the request, are at fault: it says which record
    SecretKeyError: 503,
}

#: Headers of an aiohttp HTTP error that a problem response keeps (``Allow`` on 405 …).
_KEPT_HEADERS = ("Allow", "WWW-Authenticate", "Retry-After")


FAULT_DETAIL = "the server failed to handle the request; the fault is logged"


def problem(
    status: int,
    detail: str,
    *,
    errors: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """A problem-details response: ``type``, ``title``, ``status``, ``detail`` and maybe ``errors``."""
    body = problem_body(status, detail, errors=errors)
    return json_response(body, status=status, headers=headers, content_type=PROBLEM_CONTENT_TYPE)


def problem_body(status: int, detail: str, *, errors: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The RFC 9457 problem-details body (REST answers it; MCP tool errors carry it)."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = dict(errors)
    return body


def domain_problem_body(exc: ScenarioKitError) -> dict[str, Any]:
    """The problem body of a domain error, as REST answers it (a fault says nothing of itself)."""
    status = status_of(exc)
    if status == 500:
        return problem_body(500, FAULT_DETAIL)
    if isinstance(exc, ValidationError):
        return problem_body(status, exc.message, errors=exc.errors)
    return problem_body(status, str(exc))


def status_of(exc: ScenarioKitError) -> int:
    """The HTTP status the table gives a domain error (500 for one it does not list)."""
    for cls in type(exc).__mro__:
        if cls in STATUS_OF:
            return STATUS_OF[cls]
    return 500


def domain_problem(exc: ScenarioKitError) -> web.Response:
    """The problem response of a domain error."""
    status = status_of(exc)
    if status == 500:
        return server_fault(exc)
    return json_response(domain_problem_body(exc), status=status, content_type=PROBLEM_CONTENT_TYPE)


def http_problem(exc: web.HTTPException, request: web.Request) -> web.Response:
    """The problem response of an aiohttp HTTP error (unknown route, wrong method, body too large …)."""
    headers = {name: exc.headers[name] for name in _KEPT_HEADERS if name in exc.headers}
    if exc.status == 413:
        detail = f"the request body is larger than the limit of {request.client_max_size} bytes"
    else:
        default_text = f"{exc.status}: {exc.reason}"
        detail = (
            _HTTP_DETAILS.get(exc.status) or (exc.text if exc.text != default_text else None) or exc.reason
        )
    return problem(exc.status, detail, headers=headers)


def server_fault(exc: BaseException) -> web.Response:
    """A 500 that tells the client nothing of the fault; the traceback goes to the log."""
    log.error("unhandled error", exc_info=exc)
    return problem(500, FAULT_DETAIL)


_HTTP_DETAILS = {
    404: "no resource at this path",
    405: "the method is not allowed on this resource; see the Allow header",
}


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every error raised while handling a request into a problem-details response."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return http_problem(exc, request)
    except ScenarioKitError as exc:
        return domain_problem(exc)
    except Exception as exc:  # the last line of defence: a fault must not show its stack trace
        return server_fault(exc)
