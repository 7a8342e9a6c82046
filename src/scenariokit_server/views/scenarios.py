"""``/api/v1/scenarios``: list, create, read, update and delete scenarios, and list one's runs."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.inputs import Patch, ScenarioInput
from scenariokit.formats.queries import RunQuery, ScenarioQuery, StatsQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, message_param, operation, stats_params
from scenariokit_server.views import (
    API_PREFIX,
    body_as,
    created,
    no_content,
    ok,
    origin,
    path_id,
    query_params,
)


@operation(
    "scenarios",
    "List scenarios",
    description="One page of scenarios, each with its steps and credential links; newest change first "
    "unless `orderBy`/`orderDir` say otherwise. `q` keeps the scenarios whose name holds it "
    "(any case).",
    response=schemas.ScenarioPage,
    params=list_params(ScenarioQuery),
)
async def list_scenarios(request: web.Request) -> web.Response:
    """One page of scenarios."""
    services = keys.services(request)
    page = await services.scenarios.list_records(ScenarioQuery.from_params(query_params(request)))
    return ok(shape.page_json(page, lambda item: shape.scenario_record_json(services.converter, item)))


@operation(
    "scenarios",
    "Create a scenario",
    description="The body may hold the scenario's `steps` and credential links (`credentials`).",
    status=201,
    body=schemas.ScenarioInput,
    response=schemas.ScenarioSaved,
    params=[message_param()],
    errors=(400, 413),
)
async def create_scenario(request: web.Request) -> web.Response:
    """Create a scenario, with its steps and credential links when given."""
    services = keys.services(request)
    command = await body_as(request, ScenarioInput, "scenario")
    scenario = await services.scenarios.create(command, origin=origin(request))
    location = f"{API_PREFIX}/scenarios/{scenario.id}"
    return created(shape.saved_scenario_json(services.converter, scenario), location)


@operation(
    "scenarios",
    "Read a scenario with its steps and credential links",
    description="The scenario with its steps ordered by `order` and its credential links.",
    response=schemas.Scenario,
    errors=(400, 404),
)
async def get_scenario(request: web.Request) -> web.Response:
    """One scenario."""
    services = keys.services(request)
    scenario = await services.scenarios.get(path_id(request))
    return ok(shape.scenario_json(services.converter, scenario))


@operation(
    "scenarios",
    "Change some fields of a scenario",
    description="Only the fields the body names change; the others keep their value. `steps` and "
    "`credentials`, when given, replace the scenario's whole list.",
    body=schemas.ScenarioInput(partial=True),
    response=schemas.ScenarioSaved,
    params=[message_param()],
    errors=(400, 404, 413),
)
async def patch_scenario(request: web.Request) -> web.Response:
    """Partial update: fields not named keep their value."""
    services = keys.services(request)
    command = await body_as(request, Patch[ScenarioInput], "scenario")
    scenario = await services.scenarios.update(path_id(request), command, origin=origin(request))
    return ok(shape.saved_scenario_json(services.converter, scenario))


@operation(
    "scenarios",
    "Replace a scenario",
    description="Steps and credential links are replaced too when the body gives them.",
    body=schemas.ScenarioInput,
    response=schemas.ScenarioSaved,
    params=[message_param()],
    errors=(400, 404, 413),
)
async def put_scenario(request: web.Request) -> web.Response:
    """Full update."""
    services = keys.services(request)
    command = await body_as(request, ScenarioInput, "scenario")
    scenario = await services.scenarios.replace(path_id(request), command, origin=origin(request))
    return ok(shape.saved_scenario_json(services.converter, scenario))


@operation(
    "scenarios",
    "Delete a scenario with its steps, links, revisions and finished runs",
    status=204,
    errors=(400, 404, 409),
    description="Refused with 409 while a run of the scenario is in progress: cancel it or let it finish.",
)
async def delete_scenario(request: web.Request) -> web.Response:
    """Delete a scenario."""
    await keys.services(request).scenarios.delete(path_id(request))
    return no_content()


@operation(
    "runs",
    "List the runs of one scenario",
    description="One page of the runs of this scenario, newest first unless `orderBy`/`orderDir` say "
    "otherwise; `status` filters them.",
    response=schemas.RunPage,
    params=list_params(RunQuery, exclude=("scenarioId",)),
    errors=(400, 404),
)
async def list_scenario_runs(request: web.Request) -> web.Response:
    """One page of the runs of one scenario."""
    services = keys.services(request)
    page = await services.runs.list_for_scenario(
        path_id(request), RunQuery.from_params(query_params(request)), timings=False
    )
    return ok(shape.runs_page_json(services.converter, page))


@operation(
    "runs",
    "A scenario's run history: counts, rates, duration percentiles and its last failure",
    description="Over the finished runs created in the last `days` days (docs/monitoring.md, History).",
    response=schemas.RunStats,
    params=stats_params(),
    errors=(400, 404),
)
async def scenario_stats(request: web.Request) -> web.Response:
    """The figures of one scenario's recent runs."""
    services = keys.services(request)
    stats = await services.runs.stats(path_id(request), StatsQuery.from_params(query_params(request)))
    return ok(shape.stats_json(services.converter, stats))
