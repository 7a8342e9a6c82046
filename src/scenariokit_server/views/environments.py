"""``/api/v1/environments``: named key-value data that step code reads."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.inputs import EnvironmentInput, Patch
from scenariokit.formats.queries import EnvironmentQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, operation
from scenariokit_server.views import API_PREFIX, body_as, created, no_content, ok, path_id, query_params


@operation(
    "environments",
    "List environments",
    description="One page of environments, newest change first unless `orderBy`/`orderDir` say otherwise."
    " `q` keeps the environments whose name holds it (any case).",
    response=schemas.EnvironmentPage,
    params=list_params(EnvironmentQuery),
)
async def list_environments(request: web.Request) -> web.Response:
    """One page of environments."""
    services = keys.services(request)
    page = await services.environments.list(EnvironmentQuery.from_params(query_params(request)))
    return ok(shape.page_json(page, lambda item: shape.environment_json(services.converter, item)))


@operation(
    "environments",
    "Create an environment",
    description="`data` is any JSON object.",
    status=201,
    body=schemas.EnvironmentInput,
    response=schemas.Environment,
    errors=(400, 413),
)
async def create_environment(request: web.Request) -> web.Response:
    """Create an environment."""
    services = keys.services(request)
    environment = await services.environments.create(await body_as(request, EnvironmentInput, "environment"))
    location = f"{API_PREFIX}/environments/{environment.id}"
    return created(shape.environment_json(services.converter, environment), location)


@operation(
    "environments",
    "Read an environment",
    description="The environment with its `data`, which step code reads as `helpers.env`.",
    response=schemas.Environment,
    errors=(400, 404),
)
async def get_environment(request: web.Request) -> web.Response:
    """One environment."""
    services = keys.services(request)
    environment = await services.environments.get(path_id(request))
    return ok(shape.environment_json(services.converter, environment))


@operation(
    "environments",
    "Change some fields of an environment",
    description="Only the fields the body names change; `data`, when given, is replaced whole.",
    body=schemas.EnvironmentInput(partial=True),
    response=schemas.Environment,
    errors=(400, 404, 413),
)
async def patch_environment(request: web.Request) -> web.Response:
    """Partial update: fields not named keep their value (``data`` is replaced whole)."""
    services = keys.services(request)
    environment = await services.environments.update(
        path_id(request), await body_as(request, Patch[EnvironmentInput], "environment")
    )
    return ok(shape.environment_json(services.converter, environment))


@operation(
    "environments",
    "Replace an environment",
    description="The body replaces the environment, `data` included.",
    body=schemas.EnvironmentInput,
    response=schemas.Environment,
    errors=(400, 404, 413),
)
async def put_environment(request: web.Request) -> web.Response:
    """Full update."""
    services = keys.services(request)
    environment = await services.environments.replace(
        path_id(request), await body_as(request, EnvironmentInput, "environment")
    )
    return ok(shape.environment_json(services.converter, environment))


@operation(
    "environments",
    "Delete an environment",
    description="Scenarios using it as their default are unlinked; runs against it stay readable.",
    status=204,
    errors=(400, 404),
)
async def delete_environment(request: web.Request) -> web.Response:
    """Delete an environment."""
    await keys.services(request).environments.delete(path_id(request))
    return no_content()
