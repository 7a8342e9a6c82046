"""``/api/v1/run``: queue runs, list and read them with their logs, cancel them, fetch their files."""

from __future__ import annotations

import uuid

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.convert import structure_run_request
from scenariokit.formats.inputs import RunBatchInput
from scenariokit.formats.queries import LogQuery, RunQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import BINARY, list_params, log_params, operation
from scenariokit_server.trace import trace_viewer_url
from scenariokit_server.views import API_PREFIX, created, json_body, ok, path_id, query_params


async def _detail(request: web.Request, run_id: uuid.UUID, logs: LogQuery | None = None) -> dict[str, object]:
    services = keys.services(request)
    detail = await services.runs.get(run_id, logs)
    return shape.run_detail_json(
        services.converter, detail, trace_viewer_url=trace_viewer_url(request.app, detail.run)
    )


@operation(
    "runs",
    "List all runs",
    description="One page of all runs, newest first unless `orderBy`/`orderDir` say otherwise; `status`, "
    "`scenarioId` and `batchId` filter them. A list leaves out each run's timings and log.",
    response=schemas.RunPage,
    params=list_params(RunQuery),
)
async def list_runs(request: web.Request) -> web.Response:
    """One page of runs, newest first unless ``orderBy``/``orderDir`` say otherwise."""
    services = keys.services(request)
    page = await services.runs.list(RunQuery.from_params(query_params(request)), timings=False)
    return ok(shape.runs_page_json(services.converter, page))


@operation(
    "runs",
    "Queue a run",
    description="The run starts `in_progress`; `environmentId` is required. With `environmentIds` "
    "instead, one run per environment is queued as a batch: the answer is a `RunBatch`, `{batchId, "
    "runs}`, and `GET /api/v1/run?batchId=` lists them (docs/monitoring.md). The two answers differ "
    "by `runs`, which only a batch has (a single run's `batchId` is null): one check tells them apart, "
    '`"runs" in answer` in TypeScript, `isinstance(answer, RunBatch)` in a generated Python client.',
    status=201,
    body={"oneOf": [schemas.RunInput, schemas.RunBatchInput]},
    response={"oneOf": [schemas.RunDetail, schemas.RunBatch]},
    errors=(400, 413),
)
async def create_run(request: web.Request) -> web.Response:
    """Queue a run of a scenario against an environment, or a batch against several."""
    services = keys.services(request)
    command = structure_run_request(services.converter, await json_body(request))
    if isinstance(command, RunBatchInput):
        batch = await services.runs.create_batch(command)
        body = shape.batch_json(services.converter, batch.batch_id, batch.runs)
        return created(body, f"{API_PREFIX}/run?batchId={batch.batch_id}")
    run = await services.runs.create(command)
    return created(await _detail(request, run.id), f"{API_PREFIX}/run/{run.id}")


@operation(
    "runs",
    "Read a run with its environment, session, step results and a page of its log",
    description="The run with its environment, saved session (or null), step results, artifacts and "
    "timings, and one page of its log: `page`/`limit` page the log, `q` keeps the lines that "
    "hold it (any case).",
    response=schemas.RunDetail,
    params=log_params(),
    errors=(400, 404),
)
async def get_run(request: web.Request) -> web.Response:
    """One run; ``page``/``limit`` page its log and ``q`` filters it."""
    return ok(await _detail(request, path_id(request), LogQuery.from_params(query_params(request))))


@operation(
    "runs",
    "Cancel a run in progress",
    description="The run ends `fail` with `error.kind` `cancelled`; a finished run gives 409.",
    response=schemas.RunDetail,
    errors=(400, 404, 409),
)
async def cancel_run(request: web.Request) -> web.Response:
    """Stop a run."""
    run = await keys.services(request).runs.cancel(path_id(request))
    return ok(await _detail(request, run.id))


@operation(
    "runs",
    "Download a file the run recorded",
    description="Screenshots (PNG) of failed steps and Playwright traces (zip).",
    response=BINARY,
    response_types=("image/png", "application/zip", "application/octet-stream"),
    errors=(400, 404),
)
async def get_artifact(request: web.Request) -> web.StreamResponse:
    """Stream an artifact file with its content type."""
    name = request.match_info["name"]
    path = await keys.services(request).runs.artifact(path_id(request), name)
    return web.FileResponse(path, headers={"Content-Type": shape.artifact_content_type(name)})
