"""``/api/v1/snippets``: reusable code, unique by alias, called from step code with ``runSnippet``."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.inputs import Patch, SnippetInput
from scenariokit.formats.queries import SnippetQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, operation
from scenariokit_server.views import API_PREFIX, body_as, created, no_content, ok, path_id, query_params


@operation(
    "snippets",
    "List snippets",
    description="One page of snippets, newest change first unless `orderBy`/`orderDir` say otherwise. `q`"
    " keeps the snippets whose alias or title holds it (any case).",
    response=schemas.SnippetPage,
    params=list_params(SnippetQuery),
)
async def list_snippets(request: web.Request) -> web.Response:
    """One page of snippets; ``q`` matches alias or title."""
    services = keys.services(request)
    page = await services.snippets.list(SnippetQuery.from_params(query_params(request)))
    return ok(shape.page_json(page, lambda item: shape.snippet_json(services.converter, item)))


@operation(
    "snippets",
    "Create a snippet",
    description="`alias` is unique (409).",
    status=201,
    body=schemas.SnippetInput,
    response=schemas.Snippet,
    errors=(400, 409, 413),
)
async def create_snippet(request: web.Request) -> web.Response:
    """Create a snippet."""
    services = keys.services(request)
    snippet = await services.snippets.create(await body_as(request, SnippetInput, "snippet"))
    return created(shape.snippet_json(services.converter, snippet), f"{API_PREFIX}/snippets/{snippet.id}")


@operation(
    "snippets",
    "Read a snippet",
    description="The snippet with its code, which step code calls by alias: `await runSnippet(alias, args)`.",
    response=schemas.Snippet,
    errors=(400, 404),
)
async def get_snippet(request: web.Request) -> web.Response:
    """One snippet."""
    services = keys.services(request)
    snippet = await services.snippets.get(path_id(request))
    return ok(shape.snippet_json(services.converter, snippet))


@operation(
    "snippets",
    "Change some fields of a snippet",
    description="Only the fields the body names change; the others keep their value.",
    body=schemas.SnippetInput(partial=True),
    response=schemas.Snippet,
    errors=(400, 404, 409, 413),
)
async def patch_snippet(request: web.Request) -> web.Response:
    """Partial update."""
    services = keys.services(request)
    snippet = await services.snippets.update(
        path_id(request), await body_as(request, Patch[SnippetInput], "snippet")
    )
    return ok(shape.snippet_json(services.converter, snippet))


@operation(
    "snippets",
    "Replace a snippet",
    description="The body replaces the snippet; a new `alias` must be unique (409 otherwise).",
    body=schemas.SnippetInput,
    response=schemas.Snippet,
    errors=(400, 404, 409, 413),
)
async def put_snippet(request: web.Request) -> web.Response:
    """Full update."""
    services = keys.services(request)
    snippet = await services.snippets.replace(
        path_id(request), await body_as(request, SnippetInput, "snippet")
    )
    return ok(shape.snippet_json(services.converter, snippet))


@operation(
    "snippets",
    "Delete a snippet",
    description="The snippet is removed; steps that still call it fail at run time naming it.",
    status=204,
    errors=(400, 404),
)
async def delete_snippet(request: web.Request) -> web.Response:
    """Delete a snippet."""
    await keys.services(request).snippets.delete(path_id(request))
    return no_content()
