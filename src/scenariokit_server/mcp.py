"""The MCP endpoint at ``/mcp``: the SDK's streamable-HTTP server, mounted in the aiohttp application.

The server is stateless and answers in JSON (no SSE stream, no session id), so any number of server
processes behind one address can answer any request. The bearer-token rule of ``/api/v1`` covers
``/mcp`` too: the application's auth middleware checks every request before it reaches the SDK.

The tools live in :mod:`scenariokit_server.mcp_tools`; here their answers become MCP results: the REST
JSON shape as structured content with its JSON text, and a domain error as a tool error (``isError``)
carrying the problem body REST answers the same error with.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

import anyio
import pydantic
from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp_asgi.resource import (
    ASGIApplicationType,
    ASGIContext,
    ASGIReceiveType,
    ASGIScopeType,
    ASGISendType,
)
from marshmallow import Schema
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    CallToolResult,
    ContentBlock,
    ImageContent,
    InputRequiredResult,
    ListToolsResult,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)

from scenariokit.domain.access import Scope
from scenariokit.domain.errors import ScenarioKitError
from scenariokit.domain.json_values import json_fault
from scenariokit.services import Services
from scenariokit.services.caller import Caller, calling_as
from scenariokit_server import keys, schemas
from scenariokit_server.access import TOOL_SCOPES
from scenariokit_server.errors import domain_problem_body, problem_body, status_of
from scenariokit_server.mcp_mount import MCP_PATH
from scenariokit_server.mcp_tools import JSON, Answer, Picture, RunRequest, ScenarioKitTools
from scenariokit_server.trace import trace_viewer_url
from scenariokit_server.views.health import health_report, service_version

INSTRUCTIONS = """\
scenariokit stores browser-automation test scenarios and runs them in real Chromium.
A scenario is a list of steps; each step is Python code using Playwright's async API (see create_step).
An environment holds the data steps read, e.g. {"url": "https://staging.example.com"} for helpers.getEnvUrl().
Typical flow: create_environment, create_scenario with steps, run_scenario with wait=true, then get_run
with q to search the log. Ids are UUIDs. Errors come back as tool errors with the field at fault.
To explore a site live and keep what worked: authoring_start, authoring_exec (repeat), authoring_save,
then run_scenario. To heal a scenario failing at step N: authoring_start with upToStep=N-1.
To fix failing checks: list_runs with status="fail", get_run with includeScreenshots=true (the failed
step's screenshot, its error, the log), get_scenario, update_step, then run_scenario with wait=true.
"""

log = logging.getLogger(__name__)


def mcp_handler(asgi_app: ASGIApplicationType) -> Handler:
    """An aiohttp handler that answers a request with the MCP ASGI application.

    ``/mcp`` is an ordinary aiohttp route (``POST`` only: the endpoint is stateless, so it offers no SSE
    stream to ``GET`` — the MCP transport allows a 405 for that — and no session to ``DELETE``), so the
    middlewares, the 405 problem answer and aiohttp-cors's response hook all see an ordinary route.
    """

    async def handle_mcp(request: web.Request) -> web.StreamResponse:
        bridged = functools.partial(_receive_per_asgi, asgi_app, keys.caller(request))
        return await ASGIContext(bridged, request, MCP_PATH).get_response()

    return handle_mcp


async def _receive_per_asgi(
    app: ASGIApplicationType,
    caller: Caller,
    scope: ASGIScopeType,
    receive: ASGIReceiveType,
    send: ASGISendType,
) -> None:
    """Run ``app`` with a ``receive`` that, once the body is read, waits (until cancelled) as ASGI says.

    aiohttp-asgi answers every later ``receive`` at once with an empty body instead, so an SDK path that
    watches for the client's disconnect would spin without yielding and stall the event loop.

    The request's ``caller`` rides in the ASGI scope: the SDK handles the message in a task of its own
    session manager, where the request's context is not, and hands the tools' middleware the scope.
    """
    scope[CALLER_SCOPE_KEY] = caller
    body_read = False

    async def receive_after_body() -> MutableMapping[str, Any]:
        nonlocal body_read
        if body_read:
            await anyio.sleep_forever()
        message = await receive()
        body_read = not message.get("more_body", False)
        return message

    await app(scope, receive_after_body, send)


def _hints(
    *, read_only: bool = False, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    # open world: only a run reaches beyond scenariokit (it browses the environment's site)
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


_READ, _CREATE = _hints(read_only=True), _hints()
_UPDATE, _DELETE = _hints(idempotent=True), _hints(destructive=True, idempotent=True)

#: Every tool (a coroutine method of :class:`ScenarioKitTools` of the same name) with its hints.
TOOL_HINTS: dict[str, ToolAnnotations] = {
    "list_scenarios": _READ,
    "get_scenario": _READ,
    "create_scenario": _CREATE,
    "update_scenario": _UPDATE,
    "delete_scenario": _DELETE,
    "create_step": _CREATE,
    "update_step": _UPDATE,
    "delete_step": _DELETE,
    "list_revisions": _READ,
    "diff_revisions": _READ,
    "restore_revision": _UPDATE,
    "list_environments": _READ,
    "create_environment": _CREATE,
    "update_environment": _UPDATE,
    "run_scenario": _CREATE.model_copy(update={"open_world_hint": True}),
    "get_run": _READ,
    "list_schedules": _READ,
    "create_schedule": _CREATE,
    "update_schedule": _UPDATE,
    "delete_schedule": _DELETE,
    "authoring_start": _CREATE.model_copy(update={"open_world_hint": True}),
    "authoring_exec": _CREATE.model_copy(update={"open_world_hint": True}),
    "authoring_snapshot": _READ.model_copy(update={"open_world_hint": True}),
    "authoring_save": _CREATE,
    "authoring_end": _DELETE,
    "list_runs": _READ,
    "cancel_run": _UPDATE,
    "get_scenario_stats": _READ,
    "list_snippets": _READ,
    "get_snippet": _READ,
    "list_credentials": _READ,
    "list_sessions": _READ,
    "delete_environment": _DELETE,
    "export_yaml": _READ,
    "import_yaml": _UPDATE,
    "get_health": _READ,
}

#: What each tool answers (its ``outputSchema``): the OpenAPI response schema of the REST route it
#: mirrors, from the same attrs classes (:mod:`scenariokit_server.schemas`).
TOOL_OUTPUTS: dict[str, type[Schema] | Mapping[str, Any]] = {
    "list_scenarios": schemas.ScenarioPage,
    "get_scenario": schemas.Scenario,
    "create_scenario": schemas.ScenarioSaved,
    "update_scenario": schemas.ScenarioSaved,
    "delete_scenario": schemas.Deleted,
    "create_step": schemas.StepSaved,
    "update_step": schemas.StepSaved,
    "delete_step": schemas.Deleted,
    "list_environments": schemas.EnvironmentPage,
    "create_environment": schemas.Environment,
    "update_environment": schemas.Environment,
    "run_scenario": {"type": "object", "oneOf": [schemas.RunDetail, schemas.RunBatch]},
    "get_run": schemas.RunDetail,
    "list_schedules": schemas.SchedulePage,
    "create_schedule": schemas.Schedule,
    "update_schedule": schemas.Schedule,
    "delete_schedule": schemas.Deleted,
    "authoring_start": schemas.AuthoringStart,
    "authoring_exec": schemas.AuthoringExec,
    "authoring_snapshot": schemas.AuthoringPage,
    "authoring_save": schemas.ScenarioSaved,
    "authoring_end": schemas.AuthoringEnded,
    "list_runs": schemas.RunPage,
    "cancel_run": schemas.RunDetail,
    "get_scenario_stats": schemas.RunStats,
    "list_snippets": schemas.SnippetPage,
    "get_snippet": schemas.Snippet,
    "list_credentials": schemas.CredentialPage,
    "list_sessions": schemas.SessionPage,
    "delete_environment": schemas.Deleted,
    "export_yaml": schemas.YamlExport,
    "import_yaml": schemas.ImportReport,
    "get_health": schemas.Health,
    "list_revisions": schemas.RevisionPage,
    "diff_revisions": schemas.RevisionDiff,
    "restore_revision": schemas.Scenario,
}

#: Input schema words a tool adds to what its parameters say (a rule across parameters).
TOOL_INPUT_RULES: dict[str, Mapping[str, Any]] = {"run_scenario": RunRequest.ONE_OF_REQUIRED}

#: The server's base URL of the request a tool answers, so its resource links are absolute.
_BASE_URL: contextvars.ContextVar[str] = contextvars.ContextVar("scenariokit_mcp_base_url", default="")


def tool_result(answer: Answer) -> CallToolResult:
    """A successful result: the JSON shape as structured content and as text, after the answer's notes,
    images and resource links."""
    text = json.dumps(answer.data, indent=2, ensure_ascii=False)
    blocks: list[ContentBlock] = [TextContent(type="text", text=note) for note in answer.notes]
    for image in answer.images:
        picture = image if isinstance(image, Picture) else Picture(image)
        blocks.append(
            ImageContent(
                type="image", data=base64.b64encode(picture.data).decode(), mime_type=picture.mime_type
            )
        )
    base = _BASE_URL.get()
    blocks.extend(
        ResourceLink(type="resource_link", uri=base + link.url, name=link.name, mime_type=link.mime_type)
        for link in answer.links
    )
    return CallToolResult(
        content=[*blocks, TextContent(type="text", text=text)], structured_content=answer.data
    )


def problem_of(exc: ScenarioKitError) -> JSON:
    """The problem-details body REST answers ``exc`` with, from REST's own error table."""
    if status_of(exc) == 500:
        log.error("tool failed", exc_info=exc)
    return domain_problem_body(exc)


def tool_error(problem: JSON) -> CallToolResult:
    """A tool error with a problem body, as text ``<status> <title>: <detail> (<field>: <why>; …)``."""
    text = f"{problem['status']} {problem['title']}: {problem['detail']}"
    if problem.get("errors"):
        text += " (" + "; ".join(f"{field}: {why}" for field, why in problem["errors"].items()) + ")"
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=problem, is_error=True
    )


def as_mcp_tool(tool: Callable[..., Awaitable[Answer]]) -> Callable[..., Awaitable[CallToolResult]]:
    """``tool`` answering MCP results; a domain error becomes a tool error, as REST would answer it."""

    @functools.wraps(tool)  # the SDK reads the tool's signature and docstring through __wrapped__
    async def call(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return tool_result(await tool(*args, **kwargs))
        except ScenarioKitError as exc:
            return tool_error(problem_of(exc))

    return call


@contextlib.contextmanager
def _logging_left_alone() -> Iterator[None]:
    """Keep ``MCPServer()``'s ``logging.basicConfig()`` from configuring the application's logging.

    basicConfig does nothing when the root logger has a handler; an unconfigured root gets one for the
    moment, so logging stays the embedding application's (or the CLI's) to set up.
    """
    root = logging.getLogger()
    placeholder = logging.NullHandler() if not root.handlers else None
    if placeholder is not None:
        root.addHandler(placeholder)
    try:
        yield
    finally:
        if placeholder is not None:
            root.removeHandler(placeholder)


def argument_problem(exc: pydantic.ValidationError) -> JSON:
    """The 400 problem body of arguments the SDK's argument model refused, each field named as REST does."""
    errors: dict[str, str] = {}
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"]) or "$"
        errors.setdefault(where, "is required" if error["type"] == "missing" else error["msg"])
    return problem_body(400, "invalid arguments", errors=errors)


class ScenarioKitMCPServer(MCPServer):
    """The SDK's server, with arguments judged as REST judges a body: the JSON rule, then problem bodies."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        request = context.request_context.request if context is not None else None
        url = getattr(request, "url", None)  # the HTTP request's (a Starlette URL)
        _BASE_URL.set(f"{url.scheme}://{url.netloc}" if url is not None else "")
        fault = json_fault(arguments)
        if fault is not None:
            where, why = fault
            return tool_error(problem_body(400, "invalid arguments", errors={where: why}))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, pydantic.ValidationError):
                return tool_error(argument_problem(exc.__cause__))
            raise


#: Where :func:`mcp_handler` puts the request's caller (:class:`~scenariokit.services.caller.Caller`).
CALLER_SCOPE_KEY = "scenariokit.caller"


def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """Who sent an MCP message: the caller the HTTP request carried, else an MCP caller with no token."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    caller = scope.get(CALLER_SCOPE_KEY) if isinstance(scope, Mapping) else None
    return caller if isinstance(caller, Caller) else Caller(door="mcp")


class ToolScopes:
    """MCP middleware holding :data:`~scenariokit_server.access.TOOL_SCOPES`.

    ``tools/list`` shows only the tools the caller's token may call; calling another is a tool error
    with the 403 problem REST answers, naming the scope needed. The call then runs as its caller
    (:func:`~scenariokit.services.caller.calling_as`), so the services record who wrote.
    """

    def __init__(self, tool_names: Iterable[str]) -> None:
        self._tools = frozenset(tool_names)

    def needed(self, name: str) -> Scope:
        """The scope tool ``name`` needs (``admin`` for a tool the table misses)."""
        return TOOL_SCOPES.get(name, Scope.ADMIN)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        caller = caller_of(ctx)
        if ctx.method == "tools/list":
            return self._visible(await call_next(ctx), caller)
        if ctx.method == "tools/call":
            name = (ctx.params or {}).get("name")
            if isinstance(name, str) and name in self._tools and not caller.allows(self.needed(name)):
                needed = self.needed(name)
                return tool_error(
                    problem_body(
                        403,
                        f"tool {name} needs a token with scope {needed.label!r}; this token has scope "
                        f"{caller.scope.label if caller.scope else 'none'!r}",
                    )
                )
        with calling_as(caller):
            return await call_next(ctx)

    def _visible(self, result: HandlerResult, caller: Caller) -> HandlerResult:
        if caller.scope is None:
            return result
        if isinstance(result, ListToolsResult):
            tools = [tool for tool in result.tools if caller.allows(self.needed(tool.name))]
            return result.model_copy(update={"tools": tools})
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            kept = [tool for tool in result["tools"] if caller.allows(self.needed(str(tool.get("name"))))]
            return {**result, "tools": kept}
        return result


def build_mcp_server(tools: ScenarioKitTools) -> MCPServer:
    """An MCP server named ``scenariokit`` offering ``tools``."""
    # No subscriptions/listen: a stateless endpoint has no stream to deliver them on, and nothing here
    # publishes events.
    with _logging_left_alone():
        server: MCPServer = ScenarioKitMCPServer(
            "scenariokit",
            version=service_version(),
            instructions=INSTRUCTIONS,
            subscriptions=False,
            tools=[mcp_tool(tools, name) for name in TOOL_HINTS],
        )
    server.middleware.append(ToolScopes(TOOL_HINTS))
    return server


def mcp_tool(tools: ScenarioKitTools, name: str) -> Tool:
    """Tool ``name`` as the SDK lists and calls it: its hints, input rules and output schema."""
    method = tools.tool(name)
    tool = Tool.from_function(
        as_mcp_tool(method),
        name=name,
        description=inspect.getdoc(method),
        annotations=TOOL_HINTS[name],
        structured_output=False,  # results are built here, not derived from the return annotation
    )
    # The SDK reads both when it lists the tool; it validates no result against the schema (our
    # results are checked by the tests and by clients, such as the official one, that validate).
    tool.fn_metadata.output_schema = schemas.output_schema_of(TOOL_OUTPUTS[name])
    tool.parameters = {**tool.parameters, **TOOL_INPUT_RULES.get(name, {})}
    return tool


#: The SDK's own Host/Origin checks stay off: the application's trust boundary
#: (:mod:`scenariokit_server.boundary`) applies one rule to ``/mcp`` and ``/api/v1`` before either is reached.
_BOUNDARY_CHECKED_BY_THE_APP = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def build_mcp_endpoint(app: web.Application) -> tuple[Handler, StreamableHTTPSessionManager]:
    """The ``/mcp`` handler of ``app`` and the session manager it hands requests to (not running yet:
    :func:`session_manager_running`). :mod:`scenariokit_server.mcp_mount` builds it on the first request.

    The tools read the application's services when they are called, so they reach the services the
    application's own ``cleanup_ctx`` opens.
    """
    settings = keys.settings(app)
    tools = ScenarioKitTools(
        functools.partial(_services, app),
        functools.partial(trace_viewer_url, app),
        health=functools.partial(health_report, app),
    )
    server = build_mcp_server(tools)
    # Builds the session manager; its Starlette routing is not used: aiohttp routes /mcp to the manager.
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.max_body_bytes,
        transport_security=_BOUNDARY_CHECKED_BY_THE_APP,
    )
    manager = server.session_manager
    return mcp_handler(manager.handle_request), manager


def _services(app: web.Application) -> Services:
    return keys.app_services(app)


@contextlib.asynccontextmanager
async def session_manager_running(manager: StreamableHTTPSessionManager) -> AsyncIterator[None]:
    """Run the SDK's session manager until the context ends (aiohttp-asgi sends no ASGI lifespan).

    The manager holds an anyio task group, which must be left by the task that entered it; the context
    may be entered by one request's task and left by the application's cleanup, so the manager runs in a
    task of its own.
    """
    started, stopping = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with manager.run():
            started.set()
            await stopping.wait()

    task = asyncio.create_task(hold(), name="scenariokit-mcp-sessions")
    ready = asyncio.create_task(started.wait())
    await asyncio.wait((task, ready), return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if task.done():
        await task  # raises what stopped the manager
        raise RuntimeError("the MCP session manager stopped as it started")
    try:
        yield
    finally:
        stopping.set()
        await task
