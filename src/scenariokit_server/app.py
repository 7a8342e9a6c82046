"""The application factory: middlewares, routes, OpenAPI docs, CORS and the resources' lifecycles."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.process
import os
import signal
from collections.abc import AsyncIterator, Callable
from functools import partial

import aiohttp_cors
import attrs
from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp_cors.urldispatcher_router_adapter import ResourcesUrlDispatcherRouterAdapter

from scenariokit.bootstrap import StopSignals, open_services, running_scheduler, stop_signals
from scenariokit.logs import configure_logging
from scenariokit.services import Services
from scenariokit_server import keys
from scenariokit_server.access import authorize
from scenariokit_server.boundary import (
    OriginOptions,
    OriginRule,
    check_hosts,
    is_loopback,
    origin_rule,
    server_options,
    trust_boundary,
)
from scenariokit_server.errors import problem_middleware
from scenariokit_server.mcp_mount import setup_mcp
from scenariokit_server.metrics import ServiceMetrics, measure_requests
from scenariokit_server.openapi import setup_openapi
from scenariokit_server.reports import setup_reports
from scenariokit_server.request_log import RequestAccessLogger, answer_request_id, request_ids
from scenariokit_server.settings import Settings, SettingsError, UnsafeBindError
from scenariokit_server.trace import ArtifactLinks, setup_trace_viewer
from scenariokit_server.views import (
    API_PREFIX,
    audit,
    authoring,
    credentials,
    devices,
    environments,
    health,
    links,
    metrics,
    revisions,
    runs,
    scenarios,
    schedules,
    sessions,
    snippets,
    steps,
    transfer,
)

CleanupContext = Callable[[web.Application], AsyncIterator[None]]

logger = logging.getLogger(__name__)


def create_app(settings: Settings, *, services: Services | None = None) -> web.Application:
    """The aiohttp application of the REST service.

    Without ``services`` the store named by the settings is opened at startup and closed at cleanup;
    with them, the caller owns their store.
    """
    links = ArtifactLinks.for_tokens(settings.api_tokens)  # signed artifact links (docs/reports.md)
    service_metrics = ServiceMetrics()
    app = web.Application(
        # The trust boundary runs before authentication: a request it refuses learns nothing more.
        middlewares=[
            measure_requests(service_metrics),  # outermost: every answer is timed with its status
            request_ids,
            problem_middleware,
            trust_boundary(settings),
            authorize(settings, links),
        ],
        client_max_size=settings.max_body_bytes,
    )
    app[keys.SETTINGS] = settings
    app.on_response_prepare.append(answer_request_id)
    app[keys.BROWSER_FACTS] = health.BrowserFacts()
    app[keys.LIFECYCLE] = keys.Lifecycle()
    app[keys.METRICS] = service_metrics
    if services is not None:
        app[keys.SERVICES] = services
    app.cleanup_ctx.extend(_lifecycles(settings, services))
    setup_routes(app)
    setup_openapi(app, settings, version=health.service_version())  # documents the routes added so far
    # The pages people look at: HTML and Playwright's viewer, outside the REST document.
    setup_trace_viewer(app, links)
    setup_reports(app)
    # After the lifecycles (MCP's session manager stops before the services close) and the REST docs;
    # the MCP SDK itself is imported by the first request to /mcp (scenariokit_server.mcp_mount).
    setup_mcp(app)
    setup_cors(app, origin_rule(settings))  # covers every route added so far, /mcp included
    return app


def _lifecycles(settings: Settings, services: Services | None) -> list[CleanupContext]:
    """What the app opens at startup and closes at cleanup, in order (closed in reverse)."""
    lifecycles: list[CleanupContext] = []
    if services is None:
        lifecycles.append(partial(_open_services, settings))
    lifecycles.append(_count_runs)
    if settings.run_scheduler:
        lifecycles.append(partial(_run_scheduler, settings))
    return lifecycles


async def _open_services(settings: Settings, app: web.Application) -> AsyncIterator[None]:
    async with open_services(settings) as services:
        app[keys.SERVICES] = services
        yield


async def _count_runs(app: web.Application) -> AsyncIterator[None]:
    """The metrics hear of every run this process finishes, through the plugin hook that reports it."""
    plugins = app[keys.SERVICES].context.plugins
    plugins.register(app[keys.METRICS])
    try:
        yield
    finally:
        plugins.unregister(app[keys.METRICS])


async def _run_scheduler(settings: Settings, app: web.Application) -> AsyncIterator[None]:
    async with running_scheduler(app[keys.SERVICES], settings=settings) as scheduler:
        app[keys.SCHEDULER] = scheduler
        yield


def _route_table() -> list[tuple[str, str, Handler]]:
    """Every route. Routes of one path stay together; fixed segments come before ``{id}`` ones."""
    ident = "{id:(?!(?:import|export)$)[^/]+}"  # never the fixed segments beside it: 405 there, not 400
    scenario = f"{API_PREFIX}/scenarios/{ident}"
    # ``steps/order`` is its own resource (PUT only): a step id never reads "order", so other methods
    # there answer 405 instead of "stepId must be a UUID".
    step = f"{scenario}/steps/{{stepId:(?!order$)[^/]+}}"
    return [
        ("GET", "/health", health.health),
        ("GET", "/metrics", metrics.metrics),
        ("GET", f"{API_PREFIX}/scenarios", scenarios.list_scenarios),
        ("POST", f"{API_PREFIX}/scenarios", scenarios.create_scenario),
        ("GET", f"{API_PREFIX}/scenarios/export", transfer.export_scenarios),
        ("POST", f"{API_PREFIX}/scenarios/import", transfer.import_scenarios),
        ("GET", scenario, scenarios.get_scenario),
        ("PATCH", scenario, scenarios.patch_scenario),
        ("PUT", scenario, scenarios.put_scenario),
        ("DELETE", scenario, scenarios.delete_scenario),
        ("GET", f"{scenario}/export", transfer.export_scenario),
        ("GET", f"{scenario}/runs", scenarios.list_scenario_runs),
        ("GET", f"{scenario}/stats", scenarios.scenario_stats),
        ("GET", f"{scenario}/revisions", revisions.list_revisions),
        ("GET", f"{scenario}/revisions/{{number}}", revisions.get_revision),
        ("GET", f"{scenario}/revisions/{{from}}/diff/{{to}}", revisions.diff_revisions),
        ("POST", f"{scenario}/revisions/{{number}}/restore", revisions.restore_revision),
        ("GET", f"{scenario}/steps", steps.list_steps),
        ("POST", f"{scenario}/steps", steps.create_step),
        ("PUT", f"{scenario}/steps/order", steps.reorder_steps),
        ("GET", step, steps.get_step),
        ("PATCH", step, steps.patch_step),
        ("PUT", step, steps.put_step),
        ("DELETE", step, steps.delete_step),
        ("GET", f"{scenario}/credentials", links.list_links),
        ("POST", f"{scenario}/credentials", links.create_link),
        ("GET", f"{scenario}/credentials/{{credentialId}}", links.get_link),
        ("DELETE", f"{scenario}/credentials/{{credentialId}}", links.delete_link),
        ("GET", f"{API_PREFIX}/environments", environments.list_environments),
        ("GET", f"{API_PREFIX}/devices", devices.list_devices),
        ("POST", f"{API_PREFIX}/environments", environments.create_environment),
        ("POST", f"{API_PREFIX}/environments/import", transfer.import_environments),
        ("GET", f"{API_PREFIX}/environments/{ident}", environments.get_environment),
        ("PATCH", f"{API_PREFIX}/environments/{ident}", environments.patch_environment),
        ("PUT", f"{API_PREFIX}/environments/{ident}", environments.put_environment),
        ("DELETE", f"{API_PREFIX}/environments/{ident}", environments.delete_environment),
        ("GET", f"{API_PREFIX}/environments/{ident}/export", transfer.export_environment),
        ("GET", f"{API_PREFIX}/credentials", credentials.list_credentials),
        ("POST", f"{API_PREFIX}/credentials", credentials.create_credential),
        ("POST", f"{API_PREFIX}/credentials/import", transfer.import_credentials),
        ("GET", f"{API_PREFIX}/credentials/{ident}", credentials.get_credential),
        ("PATCH", f"{API_PREFIX}/credentials/{ident}", credentials.patch_credential),
        ("PUT", f"{API_PREFIX}/credentials/{ident}", credentials.put_credential),
        ("DELETE", f"{API_PREFIX}/credentials/{ident}", credentials.delete_credential),
        ("GET", f"{API_PREFIX}/credentials/{ident}/export", transfer.export_credential),
        ("GET", f"{API_PREFIX}/snippets", snippets.list_snippets),
        ("POST", f"{API_PREFIX}/snippets", snippets.create_snippet),
        ("POST", f"{API_PREFIX}/snippets/import", transfer.import_snippets),
        ("GET", f"{API_PREFIX}/snippets/{ident}", snippets.get_snippet),
        ("PATCH", f"{API_PREFIX}/snippets/{ident}", snippets.patch_snippet),
        ("PUT", f"{API_PREFIX}/snippets/{ident}", snippets.put_snippet),
        ("DELETE", f"{API_PREFIX}/snippets/{ident}", snippets.delete_snippet),
        ("GET", f"{API_PREFIX}/snippets/{ident}/export", transfer.export_snippet),
        ("GET", f"{API_PREFIX}/sessions", sessions.list_sessions),
        ("GET", f"{API_PREFIX}/sessions/{{id}}", sessions.get_session),
        ("DELETE", f"{API_PREFIX}/sessions/{{id}}", sessions.delete_session),
        ("GET", f"{API_PREFIX}/schedules", schedules.list_schedules),
        ("POST", f"{API_PREFIX}/schedules", schedules.create_schedule),
        ("POST", f"{API_PREFIX}/schedules/import", transfer.import_schedules),
        ("GET", f"{API_PREFIX}/schedules/{ident}", schedules.get_schedule),
        ("PATCH", f"{API_PREFIX}/schedules/{ident}", schedules.patch_schedule),
        ("PUT", f"{API_PREFIX}/schedules/{ident}", schedules.put_schedule),
        ("DELETE", f"{API_PREFIX}/schedules/{ident}", schedules.delete_schedule),
        ("GET", f"{API_PREFIX}/schedules/{ident}/export", transfer.export_schedule),
        ("GET", f"{API_PREFIX}/run", runs.list_runs),
        ("POST", f"{API_PREFIX}/run", runs.create_run),
        ("GET", f"{API_PREFIX}/run/{{id}}", runs.get_run),
        ("POST", f"{API_PREFIX}/run/{{id}}/cancel", runs.cancel_run),
        ("GET", f"{API_PREFIX}/run/{{id}}/artifacts/{{name}}", runs.get_artifact),
        ("POST", f"{API_PREFIX}/authoring", authoring.start),
        ("GET", f"{API_PREFIX}/authoring/{{id}}", authoring.look),
        ("DELETE", f"{API_PREFIX}/authoring/{{id}}", authoring.end),
        ("POST", f"{API_PREFIX}/authoring/{{id}}/exec", authoring.execute),
        ("POST", f"{API_PREFIX}/authoring/{{id}}/save", authoring.save),
        ("GET", f"{API_PREFIX}/audit", audit.list_audit),
    ]


def setup_routes(app: web.Application) -> None:
    """Add every route of the service (GET routes answer no HEAD: the API has none)."""
    for method, path, handler in _route_table():
        app.router.add_route(method, path, handler)


def setup_cors(app: web.Application, origins: OriginRule) -> None:
    """Allow cross-origin calls from the origins the rule allows on every route but the docs' files.

    Preflight is answered for every method of a route; ``Location`` is exposed so a frontend can follow
    a create. The unsafe requests' Origin check (:mod:`scenariokit_server.boundary`) uses the same rule.
    """
    if not origins.listed and not origins.loopback:
        return
    options = aiohttp_cors.ResourceOptions(
        allow_credentials=False,
        expose_headers=("Location",),
        allow_headers=("Authorization", "Content-Type"),
        allow_methods="*",
        max_age=600,
    )
    adapter = ResourcesUrlDispatcherRouterAdapter(app.router, OriginOptions(origins, options))
    cors = aiohttp_cors.CorsConfig(app, router_adapter=adapter)
    for route in list(app.router.routes()):
        if not isinstance(route.resource, web.StaticResource):
            cors.add(route)


def check_bind(settings: Settings) -> None:
    """Refuse to expose an unauthenticated API: a non-loopback host needs tokens or ``insecure``.

    A wildcard bind without tokens also needs the Host names it answers (``SCENARIOKIT_ALLOWED_HOSTS``).
    """
    if not is_loopback(settings.host) and not settings.api_tokens and not settings.insecure:
        raise UnsafeBindError(
            f"refusing to serve on {settings.host!r} without authentication: set SCENARIOKIT_API_TOKENS, "
            "bind 127.0.0.1, or pass --insecure to allow anyone who can reach this address"
        )
    check_hosts(settings)


def check_processes(settings: Settings, processes: int) -> None:
    """Refuse ``--processes`` a deployment cannot take: several need PostgreSQL and a fixed port."""
    if processes < 1:
        raise SettingsError(f"--processes must be 1 or more, got {processes}")
    if processes == 1:
        return
    if settings.database_url.startswith("sqlite"):
        raise SettingsError(
            f"--processes {processes} needs PostgreSQL: a SQLite file has one writer at a time, so more "
            "server processes would only wait for each other; serve SQLite with one process (see "
            'docs/deployment.md, "What one process can do, and several")'
        )
    if settings.port == 0:
        raise SettingsError("--processes needs a fixed --port: the processes share one port")


def run_server(settings: Settings, *, processes: int = 1) -> None:
    """Serve until SIGINT or SIGTERM, printing the URL; refuses an unsafe bind (see :func:`check_bind`).

    A signal asks the server to stop and nothing more: a start-up under way (migrations, worker
    processes, browsers) completes, then everything closes in order, so stopping a server that is still
    starting leaves no process behind and prints no error.

    With ``processes`` > 1 (PostgreSQL), this process starts, migrates and binds first; then it starts
    the others, which bind the same port (``SO_REUSEPORT``: the kernel spreads connections over them).
    Each has its own scheduler and workers, sharing the runs through their leases.
    """
    check_bind(settings)
    check_processes(settings, processes)
    asyncio.run(_serve_until_stopped(settings, processes=processes))


def _serve_one_more(settings: Settings) -> None:
    """One of the further processes of ``serve --processes N`` (started by :func:`run_server`).

    It ignores Ctrl-C, which a terminal sends the whole process group: the first process passes each
    stop on as SIGTERM, so a Ctrl-C drains them all and a second one stops them all.
    """
    configure_logging(settings.log_format)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_until_stopped(settings, processes=1, reuse_port=True))


async def _serve_until_stopped(settings: Settings, *, processes: int = 1, reuse_port: bool = False) -> None:
    signals = stop_signals(interrupt=not reuse_port)  # a further process hears its first one's SIGTERM
    stop = signals.requested
    runner = web.AppRunner(
        create_app(settings), handle_signals=False, access_log_class=RequestAccessLogger, **server_options()
    )
    others: list[multiprocessing.process.BaseProcess] = []
    signalled = False
    try:
        await runner.setup()
        if not stop.is_set():
            shared = reuse_port or processes > 1
            await web.TCPSite(runner, settings.host, settings.port, reuse_port=shared or None).start()
            if not reuse_port:  # the first process: it starts the others, once the database is migrated
                others = _start_others(settings, processes - 1)
                url = attrs.evolve(settings, port=runner.addresses[0][1]).url
                sandbox = health.sandbox_kind(runner.app, settings)
                served = f" ({processes} processes)" if processes > 1 else ""
                lines = [
                    f"Sandbox: {sandbox}",
                    *(f"Left out: {what}" for what in health.left_out(runner.app, settings)),
                ]
                print(f"======== Running on {url}{served} ========", f"API docs at {url}/docs",
                      *lines, "(Press CTRL+C to quit)", sep="\n", flush=True)  # fmt: skip
            await stop.wait()
            _signal_all(others)  # they drain alongside this one
            signalled = True
            await drain(runner.app, settings.drain_seconds, signals, others)
    except Exception:
        if not stop.is_set():
            raise
        # Ctrl-C in a terminal signals the whole process group: workers still starting die with it.
        logger.info("stopped while starting", exc_info=logger.isEnabledFor(logging.DEBUG))
    finally:
        if not signalled:
            _signal_all(others)
        await runner.cleanup()  # closes whatever start-up had opened, also after a failed start
        for other in others:
            await asyncio.to_thread(other.join)


async def drain(
    app: web.Application,
    seconds: float,
    signals: StopSignals | None = None,
    others: list[multiprocessing.process.BaseProcess] | None = None,
) -> None:
    """Stop taking work: ``/health`` answers 503 ``draining``, the scheduler claims nothing more, and
    the runs under way finish for up to ``seconds``; those that do not go back to the queue.

    The server keeps answering meanwhile. A further signal (``signals.urgent``) ends the wait at once
    and is passed on to ``others`` (the further processes of ``serve --processes``).
    """
    app[keys.LIFECYCLE].draining = True
    scheduler = app.get(keys.SCHEDULER)
    if scheduler is None:
        return
    urgent = signals.urgent if signals is not None else None
    relay = asyncio.ensure_future(_pass_on(urgent, others or [])) if urgent is not None else None
    try:
        await scheduler.drain(seconds, cut_short=urgent)
    finally:
        if relay is not None:
            relay.cancel()


async def _pass_on(urgent: asyncio.Event, others: list[multiprocessing.process.BaseProcess]) -> None:
    await urgent.wait()
    _signal_all(others)


def _signal_all(others: list[multiprocessing.process.BaseProcess]) -> None:
    """SIGTERM to each further server process still running (the first asks it to drain, the next to stop)."""
    for other in others:
        if other.is_alive() and other.pid is not None:
            os.kill(other.pid, signal.SIGTERM)


def _start_others(settings: Settings, count: int) -> list[multiprocessing.process.BaseProcess]:
    """Start ``count`` more server processes on the same port (fresh interpreters: nothing inherited)."""
    context = multiprocessing.get_context("spawn")
    others: list[multiprocessing.process.BaseProcess] = []
    for _ in range(count):
        other = context.Process(target=_serve_one_more, args=(settings,), name="scenariokit serve")
        other.start()
        others.append(other)
    return others
