"""``/api/v1/scenarios/{id}/steps``: a scenario's steps, one by one, and their order."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.inputs import Patch, StepInput, StepOrderInput
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import operation
from scenariokit_server.views import API_PREFIX, body_as, created, no_content, ok, path_id


@operation(
    "scenarios",
    "List a scenario's steps in order",
    description="Every step of the scenario, ordered by `order` (not paged).",
    response=schemas.Step(many=True),
    errors=(400, 404),
)
async def list_steps(request: web.Request) -> web.Response:
    """Every step of a scenario, ordered by ``order`` (not paged)."""
    services = keys.services(request)
    steps = await services.scenarios.list_steps(path_id(request))
    return ok([shape.step_json(services.converter, step) for step in steps])


@operation(
    "scenarios",
    "Add a step",
    description="At `order` when given (later steps move down), else at the end.",
    status=201,
    body=schemas.StepInput,
    response=schemas.StepSaved,
    errors=(400, 404, 413),
)
async def create_step(request: web.Request) -> web.Response:
    """Add a step to a scenario."""
    services = keys.services(request)
    scenario_id = path_id(request)
    step = await services.scenarios.add_step(scenario_id, await body_as(request, StepInput, "step"))
    location = f"{API_PREFIX}/scenarios/{scenario_id}/steps/{step.id}"
    return created(shape.saved_step_json(services.converter, step, scenario_id), location)


@operation(
    "scenarios",
    "Read a step",
    description="One step of the scenario: its order, title, code and time limit.",
    response=schemas.Step,
    errors=(400, 404),
)
async def get_step(request: web.Request) -> web.Response:
    """One step."""
    services = keys.services(request)
    step = await services.scenarios.get_step(path_id(request), path_id(request, "stepId"))
    return ok(shape.step_json(services.converter, step))


@operation(
    "scenarios",
    "Change some fields of a step",
    description="Only the fields the body names change; a new `order` moves the step and renumbers the "
    "others 1..n.",
    body=schemas.StepInput(partial=True),
    response=schemas.StepSaved,
    errors=(400, 404, 413),
)
async def patch_step(request: web.Request) -> web.Response:
    """Partial update of a step; a new ``order`` moves it."""
    services = keys.services(request)
    scenario_id, step_id = path_id(request), path_id(request, "stepId")
    step = await services.scenarios.update_step(
        scenario_id, step_id, await body_as(request, Patch[StepInput], "step")
    )
    return ok(shape.saved_step_json(services.converter, step, scenario_id))


@operation(
    "scenarios",
    "Replace a step",
    description="The body replaces the step; a new `order` moves it and renumbers the others 1..n.",
    body=schemas.StepInput,
    response=schemas.StepSaved,
    errors=(400, 404, 413),
)
async def put_step(request: web.Request) -> web.Response:
    """Full update of a step; a new ``order`` moves it."""
    services = keys.services(request)
    scenario_id, step_id = path_id(request), path_id(request, "stepId")
    step = await services.scenarios.replace_step(
        scenario_id, step_id, await body_as(request, StepInput, "step")
    )
    return ok(shape.saved_step_json(services.converter, step, scenario_id))


@operation(
    "scenarios",
    "Delete a step; the steps after it move up",
    description="The step is removed and the steps after it move up one place.",
    status=204,
    errors=(400, 404),
)
async def delete_step(request: web.Request) -> web.Response:
    """Delete a step."""
    await keys.services(request).scenarios.delete_step(path_id(request), path_id(request, "stepId"))
    return no_content()


@operation(
    "scenarios",
    "Reorder a scenario's steps",
    description="`stepIds` names every step of the scenario once; they are renumbered 1..n in that order.",
    body=schemas.StepOrderInput,
    response=schemas.Step(many=True),
    errors=(400, 404, 413),
)
async def reorder_steps(request: web.Request) -> web.Response:
    """Put the steps in the given order."""
    services = keys.services(request)
    steps = await services.scenarios.reorder_steps(
        path_id(request), await body_as(request, StepOrderInput, "step order")
    )
    return ok([shape.step_json(services.converter, step) for step in steps])
