"""``/api/v1/scenarios/{id}/revisions``: list, read, diff and restore revisions (docs/revisions.md)."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.queries import RevisionQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, message_param, operation
from scenariokit_server.views import ok, only_params, origin, path_id, path_number, query_params


@operation(
    "scenarios",
    "List a scenario's revisions, newest first",
    description="Each change of the scenario or its steps made one; the items carry no content "
    "(read one revision for it, or diff two).",
    response=schemas.RevisionPage,
    params=list_params(RevisionQuery),
    errors=(400, 404),
)
async def list_revisions(request: web.Request) -> web.Response:
    """One page of a scenario's revisions."""
    services = keys.services(request)
    query = RevisionQuery.from_params(query_params(request))
    page = await services.revisions.list(path_id(request), query)
    return ok(shape.page_json(page, lambda info: shape.revision_info_json(services.converter, info)))


@operation(
    "scenarios",
    "Read one revision with the whole scenario it held",
    description="Its number, when and through which door it was made, its message and content hash, and "
    "the scenario as it was then: fields, steps in order, credential links.",
    response=schemas.Revision,
    errors=(400, 404),
)
async def get_revision(request: web.Request) -> web.Response:
    """Revision ``number`` of a scenario."""
    services = keys.services(request)
    revision = await services.revisions.get(path_id(request), path_number(request, "number"))
    return ok(shape.revision_json(services.converter, revision))


@operation(
    "scenarios",
    "What changed from one revision to another",
    description="Fields that differ as `[old, new]`; steps matched by id, each `added`, `removed` or "
    "`changed` with a unified diff of its fields and code (a moved step shows its `order`).",
    response=schemas.RevisionDiff,
    errors=(400, 404),
)
async def diff_revisions(request: web.Request) -> web.Response:
    """The diff of two revisions."""
    services = keys.services(request)
    older, newer = path_number(request, "from"), path_number(request, "to")
    diff = await services.revisions.diff(path_id(request), older, newer)
    return ok(shape.revision_diff_json(services.converter, diff))


@operation(
    "scenarios",
    "Restore a revision: the scenario holds its content again, as a new revision",
    description="History is never rewritten: the restored content becomes the next revision (source "
    "`restore`). 409 when the revision names an environment or credential deleted since.",
    response=schemas.Scenario,
    params=[message_param()],
    errors=(400, 404, 409),
)
async def restore_revision(request: web.Request) -> web.Response:
    """Restore revision ``number``; answers the scenario."""
    only_params(query_params(request), {"message"})
    services = keys.services(request)
    scenario = await services.revisions.restore(
        path_id(request), path_number(request, "number"), origin=origin(request)
    )
    return ok(shape.scenario_json(services.converter, scenario))
