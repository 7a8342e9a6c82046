"""``/api/v1/authoring``: live authoring sessions for a frontend's recorder panel (docs/authoring.md).

Each view parses its input, calls :class:`scenariokit.services.authoring.AuthoringService` and shapes
the answer with the presenters MCP uses too; step code sent here is executed code.
"""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.inputs import AuthoringExecInput, AuthoringSaveInput, AuthoringStartInput
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import operation, query_param
from scenariokit_server.views import (
    API_PREFIX,
    body_as,
    created,
    flag_param,
    no_content,
    ok,
    only_params,
    path_id,
    query_params,
)

_SCREENSHOT = query_param(
    "screenshot", {"type": "boolean", "default": False}, "also answer a PNG screenshot (base64)"
)


@operation(
    "authoring",
    "Start a live authoring session",
    description="Opens a sandboxed browser on the environment (optionally from a saved session, "
    "replaying the first `upToStep` steps of `scenarioId`). 409 when the live-session cap is reached.",
    status=201,
    body=schemas.AuthoringStartInput,
    response=schemas.AuthoringStart,
    errors=(400, 409, 413, 503),
)
async def start(request: web.Request) -> web.Response:
    """Start a session."""
    services = keys.services(request)
    started = await services.authoring.start(await body_as(request, AuthoringStartInput, "authoring session"))
    return created(
        shape.authoring_started_json(services.converter, started),
        f"{API_PREFIX}/authoring/{started.authoring_id}",
    )


@operation(
    "authoring",
    "Read the live page: URL, title, ARIA snapshot",
    description="The live page of the authoring session as it is now: URL, title and ARIA snapshot; a "
    "screenshot only when asked for.",
    response=schemas.AuthoringPage,
    params=[_SCREENSHOT],
    errors=(400, 404, 503),
)
async def look(request: web.Request) -> web.Response:
    """The session's page now."""
    services = keys.services(request)
    params = query_params(request)
    only_params(params, ("screenshot",))
    screenshot = flag_param(params, "screenshot")
    found = await services.authoring.look(path_id(request), screenshot=screenshot)
    return ok(shape.authoring_look_json(services.converter, found, screenshot=screenshot))


@operation(
    "authoring",
    "Execute step code in the live page",
    description="The code is executed as a run executes a step. A failing exec leaves the session "
    "usable (`ok: false` with the error); `live: false` says the exec ended the session.",
    body=schemas.AuthoringExecInput,
    response=schemas.AuthoringExec,
    errors=(400, 404, 413, 503),
)
async def execute(request: web.Request) -> web.Response:
    """Run code in the session."""
    services = keys.services(request)
    authoring_id = path_id(request)
    command = await body_as(request, AuthoringExecInput, "exec")
    outcome = await services.authoring.exec(authoring_id, command)
    return ok(shape.authoring_exec_json(services.converter, outcome, screenshot=command.screenshot))


@operation(
    "authoring",
    "Save the session's steps as a scenario",
    description="The replayed steps, then the execs that passed (or those in `keep`), in order: a new "
    "scenario (`name`, 201) or the scenario replayed (`scenarioId`, its steps after `upToStep` replaced).",
    body=schemas.AuthoringSaveInput,
    response=schemas.ScenarioSaved,
    other_responses={201: schemas.ScenarioSaved},
    errors=(400, 404, 409, 413, 503),
)
async def save(request: web.Request) -> web.Response:
    """Save the session."""
    services = keys.services(request)
    command = await body_as(request, AuthoringSaveInput, "save")
    scenario = await services.authoring.save(path_id(request), command)
    data = shape.saved_scenario_json(services.converter, scenario)
    if command.name is not None:
        return created(data, f"{API_PREFIX}/scenarios/{scenario.id}")
    return ok(data)


@operation(
    "authoring",
    "End a live authoring session",
    description="Closes its browser; execs not saved are gone.",
    status=204,
    errors=(400, 404, 503),
)
async def end(request: web.Request) -> web.Response:
    """End the session."""
    await keys.services(request).authoring.end(path_id(request))
    return no_content()
