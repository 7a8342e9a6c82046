"""The OpenAPI 3 document at ``/docs/openapi.json`` and the Swagger UI at ``/docs``.

aiohttp-apispec collects what the ``@operation`` decorator records on each view and serves Swagger
UI; :func:`serve_document` serves the document, its ``servers`` naming the server it was fetched
from. The document is written for client generators (docs/rest.md, Generated clients): every
operation has a summary and a description, and Spectral's ``spectral:oas`` ruleset finds no problem
(``.spectral.yaml``; tests/api/test_generated_clients.py).

aiohttp-apispec 3.0.0b2 builds an OpenAPI 2.0 ``APISpec`` and writes its own additions (``produces``,
untyped path parameters) in the 2.0 form, so :func:`setup_openapi` gives it an OpenAPI 3.0
``APISpec`` before the routes are registered and :func:`_finish_document` rewrites those additions
in the 3.0 form. Bodies and responses are documented in the 3.0 form through ``@docs``
(``requestBody``, ``content``), since ``@request_schema``/``@response_schema`` write 2.0 body
parameters. The library's validation middleware is not installed: request bodies are checked by
scenariokit's own converter; the schemas only document.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, TypeVar

from aiohttp import web
from aiohttp_apispec import AiohttpApiSpec, docs
from aiohttp_apispec.aiohttp_apispec import NAME_SWAGGER_SPEC
from apispec import APISpec
from marshmallow import Schema

from scenariokit.domain.revisions import MESSAGE_MAX
from scenariokit.formats.queries import (
    DEFAULT_LIMIT,
    DEFAULT_STATS_DAYS,
    MAX_LIMIT,
    MAX_PAGE,
    MAX_STATS_DAYS,
    AuditQuery,
    ListQuery,
    RevisionQuery,
    RunQuery,
    ScheduleQuery,
)
from scenariokit_server import schemas
from scenariokit_server.settings import Settings
from scenariokit_server.views import MAX_PATH_NUMBER, PATH_NUMBERS

DOCS_PATH = "/docs"
OPENAPI_PATH = "/docs/openapi.json"
DOCS_STATIC_PATH = "/docs/static"
OPENAPI_VERSION = schemas.OPENAPI_VERSION
JSON = "application/json"
YAML = "application/yaml"
PROBLEM = "application/problem+json"
#: An export: a YAML stream, one or more documents (no ``type``: a client parsing YAML gets data, not text).
YAML_TEXT: Mapping[str, Any] = {"description": "a YAML stream"}
#: An import body: each document one entity (a mapping) or a list of them; an empty stream imports nothing.
YAML_DOCUMENTS: Mapping[str, Any] = {
    "description": "a YAML stream; each document is one entity (a mapping) or a list of entities; "
    "empty documents are skipped"
}
BINARY: Mapping[str, Any] = {"type": "string", "format": "binary"}
ARTIFACT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

F = TypeVar("F", bound=Callable[..., Any])

TAGS = (
    {"name": "scenarios", "description": "Scenarios, their steps and credential links"},
    {"name": "environments", "description": "Named key-value data step code reads"},
    {"name": "devices", "description": "The device names a browser setting may take (Playwright's list)"},
    {"name": "credentials", "description": "Usernames and write-only secrets"},
    {"name": "snippets", "description": "Reusable code called with runSnippet"},
    {"name": "sessions", "description": "Browser sessions saved by runs"},
    {"name": "runs", "description": "Queue, read and cancel runs; fetch their files"},
    {"name": "schedules", "description": "Runs queued on a cron or an interval"},
    {"name": "transfer", "description": "YAML export and import"},
    {"name": "authoring", "description": "Live authoring sessions: explore a site, keep what worked"},
    {"name": "audit", "description": "Who wrote what, through which door (admin scope)"},
    {"name": "health", "description": "Liveness of the service and its dependencies"},
)


#: Every error response refers to the one Problem component (registered by :func:`setup_openapi`).
PROBLEM_REF: Mapping[str, Any] = {"$ref": "#/components/schemas/Problem"}


def _problem_response(status: int | str, description: str | None = None) -> dict[str, Any]:
    phrase = HTTPStatus(status).phrase if isinstance(status, int) else "Error"
    return {"description": description or phrase, "content": {PROBLEM: {"schema": dict(PROBLEM_REF)}}}


SchemaLike = type[Schema] | Schema | Mapping[str, Any]


def operation(
    tag: str,
    summary: str,
    *,
    status: int = 200,
    response: SchemaLike | None = None,
    response_types: Sequence[str] = (JSON,),
    body: SchemaLike | None = None,
    body_types: Sequence[str] = (JSON,),
    body_required: bool = True,
    params: Sequence[Mapping[str, Any]] = (),
    errors: Iterable[int] = (400,),
    other_responses: Mapping[int, SchemaLike] | None = None,
    description: str | None = None,
) -> Callable[[F], F]:
    """Document a view: its tag, summary, query parameters, body, success response and error statuses.

    Give every operation a ``description`` for the reader of Swagger UI and of generated clients (what
    the answer holds, what the parameters do); tests/api/test_openapi.py and Spectral hold them to it.

    ``response``, ``body`` and ``other_responses`` (non-problem JSON answers by status) are marshmallow
    schemas or plain JSON Schema mappings. Every operation also documents a ``default`` problem
    response: any error is a problem document.
    """
    responses: dict[int | str, Any] = {}
    if status == 204:
        responses[204] = {"description": "Done; no body"}
    else:
        content = {media_type: {"schema": response} for media_type in response_types}
        responses[status] = {"description": HTTPStatus(status).phrase, "content": content}
    if status == 201:
        responses[201]["headers"] = {
            "Location": {"description": "URL of the new resource", "schema": {"type": "string"}}
        }
    for code in errors:
        responses[code] = _problem_response(code)
    for code, schema in (other_responses or {}).items():
        responses[code] = {"description": HTTPStatus(code).phrase, "content": {JSON: {"schema": schema}}}
    responses["default"] = _problem_response("default", "Problem details (RFC 9457)")
    kwargs: dict[str, Any] = {
        "tags": [tag],
        "summary": summary,
        "parameters": list(params),
        "responses": responses,
    }
    if description:
        kwargs["description"] = description
    if body is not None:
        content = {media_type: {"schema": body} for media_type in body_types}
        kwargs["requestBody"] = {"required": body_required, "content": content}

    def decorate(view: F) -> F:
        documented: F = docs(operationId=view.__name__, **kwargs)(view)
        return documented

    return decorate


def query_param(name: str, schema: Mapping[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    """One query parameter; free text gets the storable-text pattern the server checks."""
    schema = dict(schema)
    if schema.get("type") == "string" and not {"enum", "format", "pattern"} & set(schema):
        schema["pattern"] = schemas.STORABLE_TEXT
    return {
        "in": "query",
        "name": name,
        "required": False,
        "schema": schema,
        "description": description,
        **extra,
    }


def list_params(query: type[ListQuery], *, exclude: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The query parameters of a paged list, from its query class (allowed ``orderBy`` and defaults)."""
    order_by, order_dir = query.DEFAULT_ORDER
    params = [
        query_param(
            "page", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1}, "1-based page"
        ),
        query_param(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
            "items per page",
        ),
        query_param(
            "orderBy", {"type": "string", "enum": list(query.ORDER_BY), "default": order_by}, "sort key"
        ),
        query_param(
            "orderDir", {"type": "string", "enum": ["asc", "desc"], "default": order_dir}, "sort direction"
        ),
    ]
    if issubclass(query, RunQuery):
        params.append(
            query_param("status", {"type": "string", "enum": ["in_progress", "pass", "fail"]}, "run status")
        )
        params.append(
            query_param(
                "scenarioId", {"type": "string", "format": "uuid"}, "runs of this scenario (its id, a UUID)"
            )
        )
        params.append(
            query_param(
                "batchId",
                {"type": "string", "format": "uuid"},
                "runs queued together by one request (the batchId, a UUID)",
            )
        )
        params.append(
            query_param(
                "environmentId",
                {"type": "string", "format": "uuid"},
                "runs against this environment (its id, a UUID)",
            )
        )
        params.append(
            query_param(
                "since",
                {"type": "string", "format": "date-time"},
                "runs created at or after this time (ISO 8601; without an offset, UTC)",
            )
        )
    elif issubclass(query, RevisionQuery):
        pass  # a scenario's revisions: paged and sorted, no name to search
    elif issubclass(query, AuditQuery):
        text = {"type": "string", "minLength": 1, "maxLength": 200}
        params.append(query_param("resource", text, "entries about this kind of record, e.g. `credential`"))
        params.append(query_param("tokenName", text, "entries of writes made with the token of this name"))
        params.append(
            query_param("since", {"type": "string", "format": "date-time"}, "entries at or after this time")
        )
    elif issubclass(query, ScheduleQuery):
        params.append(
            query_param(
                "scenarioId",
                {"type": "string", "format": "uuid"},
                "schedules of this scenario (its id, a UUID)",
            )
        )
    else:
        params.append(
            query_param("q", {"type": "string", "maxLength": 200}, "case-insensitive substring of the name")
        )
    return [param for param in params if param["name"] not in set(exclude)]


def message_param() -> dict[str, Any]:
    """The ``message`` query parameter of every write of a scenario (docs/revisions.md)."""
    return query_param(
        "message",
        {"type": "string", "maxLength": MESSAGE_MAX},
        "a note kept with the revision this change makes (why it was made)",
    )


def log_params() -> list[dict[str, Any]]:
    """The query parameters paging and filtering a run's log."""
    return [
        query_param(
            "page",
            {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1},
            "1-based page of the log",
        ),
        query_param(
            "limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}, "log lines per page"
        ),
        query_param("q", {"type": "string"}, "case-insensitive substring of the log message"),
    ]


def stats_params() -> list[dict[str, Any]]:
    """The query parameters of a scenario's run history figures: the window in days."""
    return [
        query_param(
            "days",
            {"type": "integer", "minimum": 1, "maximum": MAX_STATS_DAYS, "default": DEFAULT_STATS_DAYS},
            "the window: the last N days",
        )
    ]


def export_params(*, scenarios: bool = False, many: bool = False) -> list[dict[str, Any]]:
    """The query parameters of a YAML export."""
    flag = {"type": "boolean", "default": False}
    ids = {"type": "array", "items": {"type": "string", "format": "uuid"}}
    params = []
    if many:
        params.append(
            query_param("ids", ids, "scenarios to export (all when absent); repeat or comma-separate")
        )
    if scenarios:
        params.append(query_param("includeEnvironment", flag, "add the scenarios' environments"))
        params.append(query_param("credentialIds", ids, "credentials to add; repeat or comma-separate"))
    params.append(query_param("includeSecrets", flag, "write credential secrets into the export"))
    return params


def setup_openapi(app: web.Application, settings: Settings, *, version: str) -> None:
    """Serve the OpenAPI document of every route added so far, and Swagger UI.

    This is what ``setup_aiohttp_apispec(app, ...)`` does (``AiohttpApiSpec(...).register(app)``),
    spelled out so the OpenAPI 3.0 ``APISpec`` and scenariokit's schema converter are in place before
    the routes are read, and so the document is served by :func:`serve_document`, which names the
    server it is fetched from.
    """
    registry = AiohttpApiSpec(url=None, title="scenariokit", version=version)
    registry.plugin = schemas.SchemaPlugin(schema_name_resolver=registry.plugin.schema_name_resolver)
    registry.spec = APISpec(
        title="scenariokit",
        version=version,
        openapi_version=OPENAPI_VERSION,
        plugins=(registry.plugin,),
        info={
            "description": "Store browser-automation test scenarios and run them in real Chromium. "
            "Errors are RFC 9457 problem details; lists are paged by `page` and `limit`. "
            "The guides: docs/rest.md in the scenariokit repository.",
            "contact": {"name": "scenariokit"},
            "license": {"name": "MIT"},
        },
        servers=[{"url": settings.url, "description": "this server"}],
        tags=list(TAGS),
    )
    registry.spec.components.schema("Problem", schema=schemas.Problem)
    with warnings.catch_warnings():
        # aiohttp-apispec keeps its state under plain string keys
        warnings.simplefilter("ignore", web.NotAppKeyWarning)
        registry.register(app, in_place=True)
    _finish_document(app["swagger_dict"], bearer=bool(settings.api_tokens))
    app.router.add_get(OPENAPI_PATH, serve_document, name=NAME_SWAGGER_SPEC)
    # Swagger UI's page and assets, added as register() adds them when it serves the document itself
    # (url=None above leaves both to us); the page finds the document by the route's name
    registry._add_swagger_web_page(app, DOCS_STATIC_PATH, DOCS_PATH)


async def serve_document(request: web.Request) -> web.Response:
    """The OpenAPI document, its ``servers`` naming the server as this request reached it.

    The ``Host`` a request names is one the trust boundary accepted (421 otherwise), so Swagger UI's
    "Try it out" and a client generated from a downloaded document call the server they came from.
    """
    document = dict(request.app["swagger_dict"])
    document["servers"] = [{"url": str(request.url.origin()), "description": "this server"}]
    return web.json_response(document)


def _finish_document(document: dict[str, Any], *, bearer: bool) -> None:
    """Rewrite aiohttp-apispec's OpenAPI 2 additions in OpenAPI 3 form, and declare bearer auth."""
    if bearer:
        document.setdefault("components", {})["securitySchemes"] = {
            "bearerAuth": {"type": "http", "scheme": "bearer"}
        }
    from scenariokit_server.access import ROUTE_SCOPES  # the access table documents the routes it guards

    for path, operations in document.get("paths", {}).items():
        for method, op in operations.items():
            scope = ROUTE_SCOPES.get((method.upper(), path))
            if scope is not None:
                op["x-scenariokit-scope"] = scope.label
                if bearer:
                    op["responses"]["403"] = _problem_response(
                        403, f"The token's scope does not hold `{scope.label}`"
                    )
            op.pop("produces", None)
            op["parameters"] = [
                _path_param(p) if p.get("in") == "path" else p for p in op.get("parameters", [])
            ]
            if bearer and (path.startswith("/api/") or path.startswith("/mcp")):
                op["security"] = [{"bearerAuth": []}]
                op["responses"]["401"] = _problem_response(401, "Missing or wrong bearer token")


def _path_param(param: Mapping[str, Any]) -> dict[str, Any]:
    name = param["name"]
    is_id = name == "id" or name.endswith("Id")
    schema: dict[str, Any] = {"type": "string", "format": "uuid"} if is_id else {"type": "string"}
    if name == "name":  # an artifact's file name, as the run service checks it
        schema["pattern"] = ARTIFACT_NAME_PATTERN
    if name in PATH_NUMBERS:  # a revision's number, as views.path_number reads it
        schema = {"type": "integer", "minimum": 1, "maximum": MAX_PATH_NUMBER}
    return {"in": "path", "name": name, "required": True, "schema": schema}
