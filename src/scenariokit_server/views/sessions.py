"""``/api/v1/sessions``: browser sessions saved by runs; tokens masked, storage state never shown."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.queries import SessionQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, operation
from scenariokit_server.views import no_content, ok, path_id, query_params


@operation(
    "sessions",
    "List saved sessions",
    description="One page of the browser sessions runs saved (`saveSession`), tokens masked, cookies and "
    "localStorage left out. `q` keeps the sessions whose name holds it (any case).",
    response=schemas.SessionPage,
    params=list_params(SessionQuery),
    errors=(400, 503),
)
async def list_sessions(request: web.Request) -> web.Response:
    """One page of sessions."""
    services = keys.services(request)
    page = await services.sessions.list(SessionQuery.from_params(query_params(request)))
    return ok(shape.page_json(page, lambda item: shape.session_json(services.converter, item)))


@operation(
    "sessions",
    "Read a session",
    description="The token is masked; cookies and localStorage are left out.",
    response=schemas.Session,
    errors=(400, 404, 503),
)
async def get_session(request: web.Request) -> web.Response:
    """One session."""
    services = keys.services(request)
    session = await services.sessions.get(path_id(request))
    return ok(shape.session_json(services.converter, session))


@operation(
    "sessions",
    "Delete a session",
    description="Its live browser context is released.",
    status=204,
    errors=(400, 404),
)
async def delete_session(request: web.Request) -> web.Response:
    """Delete a session."""
    await keys.services(request).sessions.delete(path_id(request))
    return no_content()
