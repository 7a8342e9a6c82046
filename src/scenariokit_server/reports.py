"""``/report/``: HTML pages of runs, rendered on the server from the same service calls REST makes.

``GET /report/`` lists recent runs (``status``, ``page``, ``limit`` as ``GET /api/v1/run``);
``GET /report/runs/{id}`` shows one run (``page``, ``limit``, ``q`` page and filter its log, as
``GET /api/v1/run/{id}``). A bad id or parameter answers a 400 page, an unknown run a 404 page.

With API tokens set, a request without a valid bearer token gets 401 and a page holding nothing but a
form (:func:`token_page`): its script keeps the token in ``sessionStorage`` and asks for the same URL
with ``Authorization: Bearer``, then shows the answer. Screenshots and the trace open through signed
links (:mod:`scenariokit_server.trace`) that only such an authorized page hands out. Pages forbid
scripts and styles from anywhere but this server, and frames altogether.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiMapping

from scenariokit.domain.errors import NotFound, ScenarioKitError
from scenariokit.domain.model import Run, RunStatus
from scenariokit.formats.queries import LogQuery, RunQuery
from scenariokit.reports import model
from scenariokit.reports.render import (
    asset_files,
    render_index,
    render_message,
    render_run,
    render_token_page,
)
from scenariokit.services import Services
from scenariokit_server import keys
from scenariokit_server.errors import domain_problem_body, status_of
from scenariokit_server.trace import artifact_links
from scenariokit_server.views import path_id, query_params

REPORT_PREFIX = "/report"
ASSETS = f"{REPORT_PREFIX}/assets"
INDEX_URL = f"{REPORT_PREFIX}/"
#: What a report page may load: its own stylesheet and script, images and videos of this server.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A page holds a run's data and signed links: never kept by a shared cache or the back button.
    "Cache-Control": "no-store",
}
_ASSET_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}

View = Callable[[web.Request], Awaitable[web.StreamResponse]]


def html_page(text: str, *, status: int = 200) -> web.Response:
    """An HTML answer with the report pages' headers."""
    return web.Response(
        text=text, status=status, content_type="text/html", charset="utf-8", headers=PAGE_HEADERS
    )


def token_page() -> web.Response:
    """401: the form that asks for a token, and nothing of any run."""
    return html_page(render_token_page(assets=ASSETS), status=401)


def _errors_as_pages(view: View) -> View:
    """Answer a refused request (bad id or parameter, unknown run) with a page saying so."""

    async def page(request: web.Request) -> web.StreamResponse:
        try:
            return await view(request)
        except ScenarioKitError as exc:
            status = status_of(exc)
            if status >= 500:
                raise  # the problem middleware logs it and says nothing of it
            body = domain_problem_body(exc)
            detail = body["detail"]
            if body.get("errors"):
                detail += ": " + "; ".join(f"{field} {why}" for field, why in body["errors"].items())
            return html_page(
                render_message(body["title"], detail, assets=ASSETS, index_url=INDEX_URL), status=status
            )

    page.__name__ = view.__name__
    page.__doc__ = view.__doc__
    return page


def _link(path: str, params: MultiMapping[str] | dict[str, str], **changes: object) -> str:
    """``path`` with the request's query parameters, some changed (None removes one)."""
    merged: dict[str, str] = {name: params[name] for name in params}
    for name, value in changes.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = str(value)
    return f"{path}?{urlencode(merged)}" if merged else path


@_errors_as_pages
async def report_index(request: web.Request) -> web.StreamResponse:
    """Recent runs, newest first; ``status`` shows one status only."""
    params = query_params(request)
    query = RunQuery.from_params(params)
    services = keys.services(request)
    page = await services.runs.list(query, timings=False)
    passes = await services.runs.last_passes([detail.run.scenario_id for detail in page.items])
    rows = tuple(
        model.index_row(
            detail.run,
            url=f"{REPORT_PREFIX}/runs/{detail.run.id}",
            environment=detail.environment.name if detail.environment else str(detail.run.environment_id),
            last_pass=passes.get(detail.run.scenario_id),
        )
        for detail in page.items
    )
    passed, failed = model.counts([detail.run for detail in page.items])
    status = query.status.value if query.status else None
    links = tuple(
        (name, _link(INDEX_URL, params, status=None if name == "all" else name, page=None))
        for name in ("all", *model.RUN_STATUSES)
    )
    index = model.IndexPage(
        rows=rows,
        title="Runs",
        status=status,
        status_links=links,
        pager=model.pager(page.page, page.limit, page.total, lambda n: _link(INDEX_URL, params, page=n)),
        passed=passed,
        failed=failed,
    )
    return html_page(render_index(index, assets=ASSETS))


@_errors_as_pages
async def report_run(request: web.Request) -> web.StreamResponse:
    """One run: its steps, error, screenshot, trace link and a page of its log (``q`` filters it)."""
    run_id = path_id(request)
    params = query_params(request)
    logs = LogQuery.from_params(params)
    services = keys.services(request)
    detail = await services.runs.get(run_id, logs)
    links = artifact_links(request.app)
    run = detail.run
    changes = await _changes_since_pass(services, run)
    path = f"{REPORT_PREFIX}/runs/{run.id}"
    log_page = detail.logs
    page = model.run_page(
        run,
        environment=detail.environment.name if detail.environment else str(run.environment_id),
        log=log_page.items if log_page else (),
        artifact_url=lambda name: links.url(run.id, name),
        trace_url=links.viewer_url(run),
        log_pager=(
            model.pager(log_page.page, log_page.limit, log_page.total, lambda n: _link(path, params, page=n))
            if log_page
            else None
        ),
        log_query=logs.q or "",
        log_search=True,
        index_url=INDEX_URL,
        changes=changes,
    )
    return html_page(render_run(page, assets=ASSETS))


async def _changes_since_pass(services: Services, run: Run) -> model.Changes | None:
    """For a failed run: the diff from the revision its scenario last passed with to the run's own."""
    if run.status is not RunStatus.FAIL or run.scenario_revision is None:
        return None
    last = await services.runs.last_pass_before(run)
    diff = None
    if last is not None and last.revision is not None and last.revision != run.scenario_revision:
        try:
            diff = await services.revisions.diff(run.scenario_id, last.revision, run.scenario_revision)
        except NotFound:  # the scenario was deleted since: its runs and revisions went with it
            return None
    url = f"{REPORT_PREFIX}/runs/{last.run_id}" if last is not None else None
    return model.changes_since_pass(run, last, diff, last_pass_url=url)


async def report_asset(request: web.Request) -> web.StreamResponse:
    """The pages' stylesheet and script (open with tokens set: the token form needs them)."""
    name = request.match_info["name"]
    files = request.app[ASSET_FILES]
    if name not in files:
        raise web.HTTPNotFound()
    suffix = name[name.rfind(".") :]
    return web.Response(
        body=files[name],
        headers={
            "Content-Type": _ASSET_TYPES[suffix],
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        },
    )


async def report_root(request: web.Request) -> web.StreamResponse:
    """``/report`` without its slash goes to the index."""
    raise web.HTTPPermanentRedirect(INDEX_URL)


ASSET_FILES = web.AppKey("report_assets", dict)


def is_report_page(path: str) -> bool:
    """Whether ``path`` is a report page (which needs a token when tokens are set); assets are open."""
    return (path == REPORT_PREFIX or path.startswith(f"{REPORT_PREFIX}/")) and not path.startswith(
        f"{ASSETS}/"
    )


def setup_reports(app: web.Application) -> None:
    """Add the report routes."""
    app[ASSET_FILES] = asset_files()
    app.router.add_route("GET", REPORT_PREFIX, report_root)
    app.router.add_route("GET", INDEX_URL, report_index)
    app.router.add_route("GET", f"{REPORT_PREFIX}/runs/{{id}}", report_run)
    app.router.add_route("GET", f"{ASSETS}/{{name}}", report_asset)
