"""``/api/v1/schedules``: runs queued on a cron or an interval (docs/monitoring.md, "Schedules")."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.inputs import Patch, ScheduleInput
from scenariokit.formats.queries import ScheduleQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, operation
from scenariokit_server.views import API_PREFIX, body_as, created, no_content, ok, path_id, query_params


@operation(
    "schedules",
    "List schedules",
    description="One page of schedules; `scenarioId` keeps those of one scenario.",
    response=schemas.SchedulePage,
    params=list_params(ScheduleQuery),
)
async def list_schedules(request: web.Request) -> web.Response:
    """One page of schedules."""
    services = keys.services(request)
    page = await services.schedules.list(ScheduleQuery.from_params(query_params(request)))
    return ok(shape.page_json(page, lambda item: shape.schedule_json(services.converter, item)))


@operation(
    "schedules",
    "Create a schedule",
    description="`cron` (5 fields, read in `timezone`) or `intervalSeconds`: exactly one. Each fire "
    "queues one run per environment, each with `scheduleId`.",
    status=201,
    body=schemas.ScheduleInput,
    response=schemas.Schedule,
    errors=(400, 413),
)
async def create_schedule(request: web.Request) -> web.Response:
    """Create a schedule."""
    services = keys.services(request)
    schedule = await services.schedules.create(await body_as(request, ScheduleInput, "schedule"))
    return created(shape.schedule_json(services.converter, schedule), f"{API_PREFIX}/schedules/{schedule.id}")


@operation(
    "schedules",
    "Read a schedule",
    description="The schedule with when it fires next.",
    response=schemas.Schedule,
    errors=(400, 404),
)
async def get_schedule(request: web.Request) -> web.Response:
    """One schedule, with when it fires next."""
    services = keys.services(request)
    return ok(shape.schedule_json(services.converter, await services.schedules.get(path_id(request))))


@operation(
    "schedules",
    "Change some fields of a schedule",
    description="`enabled: false` pauses it (`nextFireAt` null); `true` resumes it.",
    body=schemas.ScheduleInput(partial=True),
    response=schemas.Schedule,
    errors=(400, 404, 413),
)
async def patch_schedule(request: web.Request) -> web.Response:
    """Partial update: fields not named keep their value."""
    services = keys.services(request)
    schedule = await services.schedules.update(
        path_id(request), await body_as(request, Patch[ScheduleInput], "schedule")
    )
    return ok(shape.schedule_json(services.converter, schedule))


@operation(
    "schedules",
    "Replace a schedule",
    description="The body replaces the schedule; when it fires next is worked out again.",
    body=schemas.ScheduleInput,
    response=schemas.Schedule,
    errors=(400, 404, 413),
)
async def put_schedule(request: web.Request) -> web.Response:
    """Full update."""
    services = keys.services(request)
    schedule = await services.schedules.replace(
        path_id(request), await body_as(request, ScheduleInput, "schedule")
    )
    return ok(shape.schedule_json(services.converter, schedule))


@operation(
    "schedules",
    "Delete a schedule (the runs it queued stay)",
    description="The schedule stops firing; the runs it queued stay.",
    status=204,
    errors=(400, 404),
)
async def delete_schedule(request: web.Request) -> web.Response:
    """Delete a schedule."""
    await keys.services(request).schedules.delete(path_id(request))
    return no_content()
