"""The MCP tools (docs/mcp.md, "Tools"): each parses its arguments, calls the application service REST
calls, and shapes the result with the REST JSON views.

A tool that takes a body (a scenario, a step, an environment, a run) declares which fields of its attrs
input class it offers (:func:`takes`): their JSON Schemas are the ones OpenAPI shows, and the arguments
are structured into the typed command by the converter REST uses, so a bad value is refused by the same
rule, in the same words, as over REST. An id that names the record a tool acts on is parsed here, as
REST parses a path id. Only the parameters MCP alone has (``wait``, ``waitSeconds``, ``clear``, list
parameters) are declared here and checked by the SDK's argument model.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import attrs
import cattrs
from pydantic import Field, WithJsonSchema

from scenariokit.domain.errors import ValidationError
from scenariokit.domain.model import FieldError, Run, camel
from scenariokit.domain.revisions import MESSAGE_MAX, Origin, RevisionSource
from scenariokit.formats import presenters as shape
from scenariokit.formats.convert import structure_input, structure_run_request
from scenariokit.formats.inputs import (
    AuthoringExecInput,
    AuthoringSaveInput,
    AuthoringStartInput,
    EnvironmentInput,
    Patch,
    RunBatchInput,
    RunInput,
    ScenarioInput,
    ScheduleInput,
    StepInput,
)
from scenariokit.formats.queries import (
    CredentialQuery,
    EnvironmentQuery,
    LogQuery,
    RevisionQuery,
    RunQuery,
    ScenarioQuery,
    ScheduleQuery,
    SessionQuery,
    SnippetQuery,
    StatsQuery,
)
from scenariokit.services import Services
from scenariokit.services.transfer import ACCEPTED_KINDS
from scenariokit_server.openapi import list_params, log_params, stats_params
from scenariokit_server.schemas import json_schema_of

JSON = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])

#: At most this many images answer ``get_run(includeScreenshots=true)``; the rest come as links.
MAX_RUN_IMAGES = 4
#: An image larger than this comes as a link, not as image content.
MAX_IMAGE_BYTES = 1024 * 1024
#: How long ``run_scenario`` waits by default: under the 60 s request timeout common MCP clients use.
DEFAULT_WAIT_SECONDS = 50.0
MAX_WAIT_SECONDS = 600.0
#: How often a waiting ``run_scenario`` reads the run (any process may be executing it).
WAIT_POLL_SECONDS = 0.25

# --- parameters ---------------------------------------------------------------------------------
# The fields of a body (a scenario, a step, an environment, a run) are not declared here: they are the
# attrs input classes' own, with the schema OpenAPI shows for them (see ``takes``); nor are the list
# parameters: they are REST's query parameters of the same list (see ``lists``). What is declared here
# is what only MCP has: the id of the record a tool acts on (REST's path id), ``wait``/``waitSeconds``
# and ``clear``.

_UUID = {"format": "uuid"}
ScenarioId = Annotated[
    str,
    Field(
        description="The scenario's id, a UUID (from list_scenarios or create_scenario).",
        json_schema_extra=_UUID,
    ),
]
StepId = Annotated[
    str,
    Field(
        description="The step's id, a UUID (from the scenario's `steps` or create_step).",
        json_schema_extra=_UUID,
    ),
]
EnvironmentId = Annotated[
    str, Field(description="The environment's id, a UUID (from list_environments).", json_schema_extra=_UUID)
]
ScheduleId = Annotated[
    str, Field(description="The schedule's id, a UUID (from list_schedules).", json_schema_extra=_UUID)
]
_SCHEDULE_FIELDS = ("scenarioId", "environmentIds", "cron", "intervalSeconds", "timezone", "enabled")
RunId = Annotated[
    str, Field(description="The run's id, a UUID (from run_scenario or list_runs).", json_schema_extra=_UUID)
]
SnippetId = Annotated[
    str, Field(description="The snippet's id, a UUID (from list_snippets).", json_schema_extra=_UUID)
]
IncludeScreenshots = Annotated[
    bool,
    Field(
        description=f"Also return the run's screenshots as images (the failed step's first, then the "
        f"newest; at most {MAX_RUN_IMAGES}, each at most {MAX_IMAGE_BYTES // 1024 // 1024} MiB); its "
        "other files come as resource links."
    ),
]
Kind = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "enum": list(ACCEPTED_KINDS),
            "description": "What the YAML holds: the kind of the REST export or import endpoint.",
        }
    ),
]
ExportIds = Annotated[
    list[str] | None,
    WithJsonSchema(
        {
            "type": ["array", "null"],
            "items": {"type": "string", "format": "uuid"},
            "description": "The records to export; for kind scenario, all when absent.",
        }
    ),
]
IncludeEnvironment = Annotated[
    bool, Field(description="kind scenario: add the scenarios' environments (section `# environments`).")
]
Yaml = Annotated[
    str,
    Field(
        description="The YAML stream, as exported (export_yaml) or as POSTed to REST's import; at most the "
        "server's request body limit (SCENARIOKIT_MAX_BODY_BYTES)."
    ),
]
Wait = Annotated[
    bool, Field(description="Block until the run ends (bounded by waitSeconds) instead of returning at once.")
]
WaitSeconds = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_WAIT_SECONDS,
        description=f"With wait: the longest to block, in seconds (at most {MAX_WAIT_SECONDS:g}); a run "
        "still going then is returned `in_progress`: follow it with get_run.",
    ),
]
AuthoringId = Annotated[
    str,
    Field(description="The authoring session's id, a UUID (from authoring_start).", json_schema_extra=_UUID),
]
Screenshot = Annotated[bool, Field(description="Also return a PNG screenshot of the page as image content.")]
Message = Annotated[
    str | None,
    Field(
        max_length=MESSAGE_MAX,
        description="A note kept with the revision this change makes: why it was made "
        "(list_revisions shows it).",
    ),
]
RevisionNumber = Annotated[
    int, Field(ge=1, description="A revision number of the scenario, from 1 (see list_revisions).")
]
FromRevision = Annotated[
    int, Field(ge=1, alias="from", description="The older revision's number (see list_revisions).")
]
ToRevision = Annotated[
    int, Field(ge=1, alias="to", description="The newer revision's number (see list_revisions).")
]
CLEAR_ABOUT = "Fields to remove (set to null). Fields neither given nor listed keep their value."


# --- answers and arguments ---------------------------------------------------------------------


@attrs.frozen
class Picture:
    """An image a tool shows beside its JSON: the bytes and their media type."""

    data: bytes
    mime_type: str = "image/png"


@attrs.frozen
class Link:
    """A file a tool points to instead of carrying it: where REST serves it (a path under ``/api/v1``)."""

    url: str
    name: str
    mime_type: str


@attrs.frozen
class Answer:
    """What a tool answers: a JSON shape of the REST API, and notes for the reader that come first."""

    data: JSON
    notes: tuple[str, ...] = ()
    #: images shown after the notes (an authoring screenshot: PNG bytes; a run's: pictures)
    images: tuple[bytes | Picture, ...] = ()
    #: files shown as resource links after the images
    links: tuple[Link, ...] = ()


def parse_id(raw: str, name: str) -> uuid.UUID:
    """The UUID naming the record a tool acts on; a ValidationError naming ``name`` otherwise."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise ValidationError(f"{name} must be a UUID", {name: f"{raw!r} is not a UUID"}) from None


def mcp_origin(message: str | None = None) -> Origin:
    """Who writes a scenario through MCP: the door and the change's message (the token's name is the
    caller's, filled in where the revision is made)."""
    try:
        return Origin(source=RevisionSource.MCP, token_name=None, message=message)
    except FieldError as exc:
        raise ValidationError("invalid message", {"message": exc.message}) from None


def _aliased(method: Callable[..., Any]) -> dict[str, str]:
    """The parameters of ``method`` whose argument has another name (``from``): alias → parameter."""
    found = {}
    for param in inspect.signature(method, eval_str=True).parameters.values():
        for meta in getattr(param.annotation, "__metadata__", ()):
            alias = getattr(meta, "alias", None)
            if alias:
                found[alias] = param.name
    return found


def given(**fields: Any) -> JSON:
    """The fields an agent gave: None means "not given"."""
    return {name: value for name, value in fields.items() if value is not None}


def changes(fields: JSON, clear: Iterable[str] | None) -> JSON:
    """A PATCH body: the fields given, and null for each field to clear."""
    body = given(**fields)
    both = sorted(set(body) & set(clear or ()))
    if both:
        raise ValidationError(
            "a field cannot be both given and cleared",
            {name: "is given and listed in clear" for name in both},
        )
    return body | dict.fromkeys(clear or ())


def query_params(**params: Any) -> dict[str, str]:
    """List parameters as the query string REST parses, so both refuse a bad value alike."""
    return {name: str(value) for name, value in params.items() if value is not None}


@attrs.frozen
class ToolInput:
    """The body a tool takes: some fields of an attrs input class, as that class states them.

    Each field is one parameter of the tool with the JSON Schema OpenAPI shows for it
    (:func:`scenariokit_server.schemas.json_schema_of`): the same bounds, required fields and
    descriptions. The arguments are structured into the input class (``Patch`` of it for an update)
    by the converter REST uses, in one call, and the tool gets the typed command.
    """

    cls: type
    what: str
    fields: tuple[str, ...]
    patch: bool = False
    clear: tuple[str, ...] = ()
    #: The tool's parameter that receives the typed command.
    keyword = "command"

    @property
    def names(self) -> frozenset[str]:
        """The arguments it consumes."""
        return frozenset({*self.fields, "clear"})

    def parameters(self) -> list[inspect.Parameter]:
        """The tool parameters of the fields (and ``clear`` for an update), keyword-only."""
        schema = json_schema_of(self.cls)
        required = set() if self.patch else set(schema.get("required", ()))
        defaults = {camel(field.name): field.default for field in attrs.fields(self.cls)}
        found = []
        for name in self.fields:
            prop = schema["properties"][name]
            # Plain required text stays ``str`` to the SDK, which then never reads it as JSON ("null", "[]").
            plain_text = prop.get("type") == "string" and "format" not in prop
            kind: Any = str if name in required and plain_text else Any
            default = defaults[name]
            if name in required:
                default = inspect.Parameter.empty
            elif self.patch or default is attrs.NOTHING or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = None  # "not given": the input's own default applies
            found.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Annotated[kind, WithJsonSchema(prop)],
                    default=default,
                )
            )
        if self.clear:
            clearable: Any = Literal.__getitem__(self.clear)
            found.append(
                inspect.Parameter(
                    "clear",
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Annotated[list[clearable] | None, Field(description=CLEAR_ABOUT)],
                    default=None,
                )
            )
        return found

    def value(self, converter: cattrs.Converter, arguments: JSON) -> Any:
        """The typed command of a call's body arguments: None is "not given"; ``clear`` nulls fields."""
        fields = {name: arguments.get(name) for name in self.fields}
        body = changes(fields, arguments.get("clear")) if self.patch else given(**fields)
        target = Patch[self.cls] if self.patch else self.cls  # type: ignore[name-defined]
        return structure_input(converter, body, target, what=self.what)


@attrs.frozen
class ToolQuery:
    """The list parameters a tool takes: REST's query parameters of the same list, as OpenAPI has them.

    The arguments given are parsed by the query class as REST parses a query string, so both refuse a
    bad value alike; the tool gets the typed query.
    """

    params: tuple[Mapping[str, Any], ...]
    parse: Callable[[Mapping[str, str]], Any]
    #: The tool's parameter that receives the typed query.
    keyword = "query"

    @property
    def names(self) -> frozenset[str]:
        """The arguments it consumes."""
        return frozenset(param["name"] for param in self.params)

    def parameters(self) -> list[inspect.Parameter]:
        """One optional parameter per query parameter, with its OpenAPI schema, default and description."""
        return [
            inspect.Parameter(
                param["name"],
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[
                    Any, WithJsonSchema({**param["schema"], "description": param["description"]})
                ],
                default=param["schema"].get("default"),  # REST's default, said where a client sees it
            )
            for param in self.params
        ]

    def value(self, converter: cattrs.Converter, arguments: JSON) -> Any:
        """The typed query of a call's list arguments (None is "not given")."""
        return self.parse(query_params(**{name: arguments.get(name) for name in self.names}))


@attrs.frozen
class RunRequest(ToolInput):
    """A run request's body: :class:`RunInput`'s fields, or :class:`RunBatchInput`'s ``environmentIds``
    instead of ``environmentId`` (a batch), told apart as REST tells them (``structure_run_request``)."""

    @property
    def names(self) -> frozenset[str]:
        """The arguments it consumes: ``environmentIds`` too."""
        return frozenset({*self.fields, "environmentIds"})

    def parameters(self) -> list[inspect.Parameter]:
        """RunInput's parameters with ``environmentId`` optional, and ``environmentIds`` as OpenAPI has it."""
        found = [
            param.replace(default=None) if param.name == "environmentId" else param
            for param in super().parameters()
        ]
        batch = json_schema_of(RunBatchInput)["properties"]["environmentIds"]
        annotation = Annotated[Any, WithJsonSchema(batch)]
        found.append(
            inspect.Parameter(
                "environmentIds", inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None
            )
        )
        return found

    def value(self, converter: cattrs.Converter, arguments: JSON) -> Any:
        """A :class:`RunInput`, or a :class:`RunBatchInput` when ``environmentIds`` is given.

        Neither given is refused naming both, as REST refuses it; the tool's schema says one of them is
        required (``anyOf``).
        """
        return structure_run_request(converter, given(**{name: arguments.get(name) for name in self.names}))

    #: What the tool's input schema adds: one of the two is required.
    ONE_OF_REQUIRED: ClassVar[JSON] = {
        "anyOf": [{"required": ["environmentId"]}, {"required": ["environmentIds"]}]
    }


def takes(
    cls: type, what: str, fields: tuple[str, ...], *, patch: bool = False, clear: tuple[str, ...] = ()
) -> Callable[[F], F]:
    """Mark a tool that takes a body of ``cls``: it is given the typed command as ``command``."""
    return _marked(ToolInput(cls, what, fields, patch, clear))


def lists(params: Iterable[Mapping[str, Any]], parse: Callable[[Mapping[str, str]], Any]) -> Callable[[F], F]:
    """Mark a tool that takes REST's list parameters ``params``: it is given ``parse(...)`` as ``query``."""
    return _marked(ToolQuery(tuple(params), parse))


def _marked(arguments: ToolInput | ToolQuery) -> Callable[[F], F]:
    def mark(tool: F) -> F:
        tool.tool_arguments = arguments  # type: ignore[attr-defined]
        return tool

    return mark


# --- tools --------------------------------------------------------------------------------------


class ScenarioKitTools:
    """The tools, over the services ``services()`` returns when a tool is called.

    Each public coroutine is one tool: its name is the tool's, its docstring the tool's description and
    its parameters the tool's arguments. A domain error it raises is answered by the caller.
    """

    def __init__(
        self,
        services: Callable[[], Services],
        trace_link: Callable[[Run], str | None] | None = None,
        *,
        health: Callable[[], Awaitable[JSON]],
    ) -> None:
        self._services = services
        #: where the server's trace viewer opens a run's trace (``traceViewerUrl``, as REST answers it)
        self._trace_link = trace_link or (lambda run: None)
        #: the body ``GET /health`` answers
        self._health = health

    def tool(self, name: str) -> Callable[..., Awaitable[Answer]]:
        """Tool ``name`` as the SDK is given it: a body's fields and a list's parameters are its own.

        For a tool marked with :func:`takes` or :func:`lists`, the SDK sees the tool's own parameters
        and those the mark declares; a call's arguments for them become one typed value (``command``
        or ``query``).
        """
        method = getattr(self, name)
        spec: ToolInput | ToolQuery | None = getattr(method, "tool_arguments", None)
        aliases = _aliased(method)
        if aliases:  # the SDK calls with the argument's name (``from``), a keyword Python refuses
            renamed = method

            @functools.wraps(renamed)
            async def called(**arguments: Any) -> Answer:
                answer: Answer = await renamed(**{aliases.get(k, k): v for k, v in arguments.items()})
                return answer

            called.__signature__ = inspect.signature(renamed, eval_str=True)  # type: ignore[attr-defined]
            method = called
        if spec is None:
            return method
        signature = inspect.signature(method, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != spec.keyword]

        @functools.wraps(method)
        async def call(**arguments: Any) -> Answer:
            rest = {key: value for key, value in arguments.items() if key not in spec.names}
            value = spec.value(self._services().converter, arguments)
            answer: Answer = await method(**rest, **{spec.keyword: value})
            return answer

        call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [*own, *spec.parameters()], return_annotation=Answer
        )
        return call

    @lists(list_params(ScenarioQuery), ScenarioQuery.from_params)
    async def list_scenarios(self, query: ScenarioQuery) -> Answer:
        """List scenarios with their steps, latest change first: {items, total, page, limit}."""
        services = self._services()
        found = await services.scenarios.list_records(query)
        return Answer(
            shape.page_json(found, lambda item: shape.scenario_record_json(services.converter, item))
        )

    async def get_scenario(self, scenarioId: ScenarioId) -> Answer:
        """Read one scenario with its steps (in order) and credential links."""
        services = self._services()
        scenario = await services.scenarios.get(parse_id(scenarioId, "scenarioId"))
        return Answer(shape.scenario_json(services.converter, scenario))

    @takes(
        ScenarioInput,
        "scenario",
        ("name", "description", "environmentId", "timeoutSeconds", "retries", "browser", "steps"),
    )
    async def create_scenario(self, command: ScenarioInput) -> Answer:
        """Create a scenario, with its steps when given.

        Returns the scenario with its id and step ids, and `warnings`: one {scenarioId, stepId, order,
        line, message} for each step line that calls a Playwright coroutine without `await` (saved all
        the same; the run fails such a step).
        """
        services = self._services()
        scenario = await services.scenarios.create(command, origin=mcp_origin())
        return Answer(shape.saved_scenario_json(services.converter, scenario))

    @takes(
        ScenarioInput,
        "scenario",
        ("name", "description", "environmentId", "timeoutSeconds", "retries", "browser"),
        patch=True,
        clear=("description", "environmentId", "timeoutSeconds"),
    )
    async def update_scenario(
        self, scenarioId: ScenarioId, command: Patch[ScenarioInput], message: Message = None
    ) -> Answer:
        """Change some fields of a scenario (its steps are changed with the step tools).

        Returns the scenario and its `warnings` (as create_scenario). A change makes a new revision
        of the scenario (`revision` in the answer); `message` says why.
        """
        services = self._services()
        scenario = await services.scenarios.update(
            parse_id(scenarioId, "scenarioId"), command, origin=mcp_origin(message)
        )
        return Answer(shape.saved_scenario_json(services.converter, scenario))

    async def delete_scenario(self, scenarioId: ScenarioId) -> Answer:
        """Delete a scenario with its steps, credential links and finished runs (refused while one runs)."""
        ident = parse_id(scenarioId, "scenarioId")
        await self._services().scenarios.delete(ident)
        return Answer({"id": str(ident), "deleted": True})

    @takes(StepInput, "step", ("execCode", "title", "order", "timeoutSeconds"))
    async def create_step(
        self, scenarioId: ScenarioId, command: StepInput, message: Message = None
    ) -> Answer:
        """Add a step to a scenario: at `order` when given, else last. Returns the step with its id.

        `execCode` is executed code: Python that every run of the scenario executes in a worker process.
        The answer's `warnings` lists each line that calls a Playwright coroutine without `await`
        ({scenarioId, stepId, order, line, message}); the step is saved all the same.
        """
        services = self._services()
        ident = parse_id(scenarioId, "scenarioId")
        step = await services.scenarios.add_step(ident, command, origin=mcp_origin(message))
        return Answer(shape.saved_step_json(services.converter, step, ident))

    @takes(
        StepInput,
        "step",
        ("execCode", "title", "order", "timeoutSeconds"),
        patch=True,
        clear=("title", "timeoutSeconds"),
    )
    async def update_step(
        self, scenarioId: ScenarioId, stepId: StepId, command: Patch[StepInput], message: Message = None
    ) -> Answer:
        """Change some fields of a step; a new `order` moves it.

        `execCode` is executed code, as in create_step: every later run of the scenario executes it.
        The answer has `warnings`, as create_step's.
        """
        services = self._services()
        ident = parse_id(scenarioId, "scenarioId")
        step = await services.scenarios.update_step(
            ident, parse_id(stepId, "stepId"), command, origin=mcp_origin(message)
        )
        return Answer(shape.saved_step_json(services.converter, step, ident))

    async def delete_step(self, scenarioId: ScenarioId, stepId: StepId, message: Message = None) -> Answer:
        """Delete a step; the steps after it move up."""
        ident = parse_id(stepId, "stepId")
        await self._services().scenarios.delete_step(
            parse_id(scenarioId, "scenarioId"), ident, origin=mcp_origin(message)
        )
        return Answer({"id": str(ident), "deleted": True})

    # --- revisions (docs/revisions.md) ---------------------------------------------------------

    @lists(list_params(RevisionQuery), RevisionQuery.from_params)
    async def list_revisions(self, scenarioId: ScenarioId, query: RevisionQuery) -> Answer:
        """List a scenario's revisions, newest first: {items: [{number, createdAt, source, tokenName,
        message, contentHash}], total, page, limit}. Each change of the scenario or its steps made one.

        To see what changed since the scenario last passed: diff_revisions from the revision its last
        passing run executed (that run's `scenarioRevision`; the scenario's stats name it as
        `lastPass.revision`) to the scenario's current `revision`.
        """
        services = self._services()
        found = await services.revisions.list(parse_id(scenarioId, "scenarioId"), query)
        return Answer(shape.page_json(found, lambda info: shape.revision_info_json(services.converter, info)))

    async def diff_revisions(
        self, scenarioId: ScenarioId, fromRevision: FromRevision, toRevision: ToRevision
    ) -> Answer:
        """What changed from revision `from` to revision `to` of a scenario.

        Returns {from, to, fields: {name: [old, new]}, steps: [{order, change: added|removed|changed,
        diff, stepId, title, moved}]}: `diff` is a unified diff of the step's fields and code.
        """
        services = self._services()
        diff = await services.revisions.diff(parse_id(scenarioId, "scenarioId"), fromRevision, toRevision)
        return Answer(shape.revision_diff_json(services.converter, diff))

    async def restore_revision(
        self, scenarioId: ScenarioId, revision: RevisionNumber, message: Message = None
    ) -> Answer:
        """Make a scenario hold what revision `revision` held again, as a new revision (history is kept).

        Returns the scenario at its new revision. Runs queued before keep executing what they were
        queued with.
        """
        services = self._services()
        scenario = await services.revisions.restore(
            parse_id(scenarioId, "scenarioId"), revision, origin=mcp_origin(message)
        )
        return Answer(shape.scenario_json(services.converter, scenario))

    @lists(list_params(EnvironmentQuery), EnvironmentQuery.from_params)
    async def list_environments(self, query: EnvironmentQuery) -> Answer:
        """List environments (data the steps read, e.g. the site's URL): {items, total, page, limit}."""
        services = self._services()
        found = await services.environments.list(query)
        return Answer(shape.page_json(found, lambda item: shape.environment_json(services.converter, item)))

    @takes(EnvironmentInput, "environment", ("name", "description", "data", "browser"))
    async def create_environment(self, command: EnvironmentInput) -> Answer:
        """Create an environment: the data a run's steps read, e.g. {"url": "https://staging.example.com"}."""
        services = self._services()
        environment = await services.environments.create(command)
        return Answer(shape.environment_json(services.converter, environment))

    @takes(
        EnvironmentInput,
        "environment",
        ("name", "description", "data", "browser"),
        patch=True,
        clear=("description",),
    )
    async def update_environment(
        self, environmentId: EnvironmentId, command: Patch[EnvironmentInput]
    ) -> Answer:
        """Change some fields of an environment; `data`, when given, replaces the stored object."""
        services = self._services()
        environment = await services.environments.update(parse_id(environmentId, "environmentId"), command)
        return Answer(shape.environment_json(services.converter, environment))

    @_marked(RunRequest(RunInput, "run", ("scenarioId", "environmentId", "saveSession")))
    async def run_scenario(
        self,
        command: RunInput | RunBatchInput,
        wait: Wait = False,
        waitSeconds: WaitSeconds = DEFAULT_WAIT_SECONDS,
    ) -> Answer:
        """Run a scenario in a fresh Chromium against an environment; the run starts `in_progress`.

        One of `environmentId` (one run) or `environmentIds` (a batch) is required.
        Running executes the steps' code (Python) in a sandboxed worker process: only run code you trust.

        With `wait` the call returns once the run is `pass` or `fail`, with step results, error and log.
        With `environmentIds` instead of `environmentId`, one run per environment is queued as a batch:
        the answer is `{batchId, runs}` (with `wait`, once every run has ended).
        """
        services = self._services()
        if isinstance(command, RunBatchInput):
            return await self._run_batch(services, command, wait, waitSeconds)
        run = await services.runs.create(command)
        if wait:
            detail = await services.runs.wait(run.id, waitSeconds, poll_seconds=WAIT_POLL_SECONDS)
        else:
            detail = await services.runs.get(run.id)
        data = shape.run_detail_json(
            services.converter, detail, trace_viewer_url=self._trace_link(detail.run)
        )
        if wait and not detail.run.finished:
            note = (
                f"The run is still in_progress after waiting {waitSeconds:g} s; call get_run with "
                f"runId {run.id} to follow it."
            )
            return Answer(data, (note,))
        return Answer(data)

    @staticmethod
    async def _run_batch(services: Services, command: RunBatchInput, wait: bool, seconds: float) -> Answer:
        batch = await services.runs.create_batch(command)
        if wait:
            batch = await services.runs.wait_batch(batch, seconds, poll_seconds=WAIT_POLL_SECONDS)
        data = shape.batch_json(services.converter, batch.batch_id, batch.runs)
        if wait and not all(detail.run.finished for detail in batch.runs):
            note = (
                f"Some runs are still in_progress after waiting {seconds:g} s; call get_run with each "
                "runId to follow them."
            )
            return Answer(data, (note,))
        return Answer(data)

    @lists(log_params(), LogQuery.from_params)
    async def get_run(
        self, runId: RunId, query: LogQuery, includeScreenshots: IncludeScreenshots = False
    ) -> Answer:
        """Read a run: status, error, step results, environment, saved session, and a page of its log.

        `q` searches the log (case-insensitive substring). With `includeScreenshots`, the failed step's
        screenshot (and the run's other images, newest first) come as images beside the JSON, and its
        other files (the trace) as resource links.
        """
        services = self._services()
        detail = await services.runs.get(parse_id(runId, "runId"), query)
        data = shape.run_detail_json(
            services.converter, detail, trace_viewer_url=self._trace_link(detail.run)
        )
        if not includeScreenshots:
            return Answer(data)
        return await self._with_files(services, detail.run, data)

    @staticmethod
    async def _with_files(services: Services, run: Run, data: JSON) -> Answer:
        """``data`` with the run's images (bounded in count and size) and links to every other file."""
        images: list[Picture] = []
        links: list[Link] = []
        notes: list[str] = []
        shown = set()
        for name in shape.image_artifacts(run):
            if len(images) == MAX_RUN_IMAGES:
                break
            path = await services.runs.artifact(run.id, name)  # the check REST's artifact route makes
            size = (await asyncio.to_thread(path.stat)).st_size
            if size > MAX_IMAGE_BYTES:
                notes.append(f"{name} ({size} bytes) is over {MAX_IMAGE_BYTES} bytes: linked, not shown.")
                continue
            images.append(
                Picture(await asyncio.to_thread(path.read_bytes), shape.artifact_content_type(name))
            )
            shown.add(name)
        for name in run.artifacts:
            if name not in shown:
                links.append(Link(shape.artifact_url(run.id, name), name, shape.artifact_content_type(name)))
        return Answer(data, tuple(notes), images=tuple(images), links=tuple(links))

    @lists(list_params(RunQuery), RunQuery.from_params)
    async def list_runs(self, query: RunQuery) -> Answer:
        """List runs, newest first: {items, total, page, limit}; filter by status (e.g. `fail`), scenario,
        environment, batch, or `since` (runs created at or after an ISO 8601 time)."""
        services = self._services()
        found = await services.runs.list(query, timings=False)
        return Answer(shape.runs_page_json(services.converter, found))

    async def cancel_run(self, runId: RunId) -> Answer:
        """Stop a run in progress: it ends `fail` with `error.kind` `cancelled` (a finished run: 409)."""
        services = self._services()
        run = await services.runs.cancel(parse_id(runId, "runId"))
        detail = await services.runs.get(run.id)
        return Answer(
            shape.run_detail_json(services.converter, detail, trace_viewer_url=self._trace_link(run))
        )

    @lists(stats_params(), StatsQuery.from_params)
    async def get_scenario_stats(self, scenarioId: ScenarioId, query: StatsQuery) -> Answer:
        """How a scenario's finished runs of the last `days` days went: runs, passed, failed, flaky,
        rates, duration percentiles and its last failure ({runId, at, message})."""
        services = self._services()
        stats = await services.runs.stats(parse_id(scenarioId, "scenarioId"), query)
        return Answer(shape.stats_json(services.converter, stats))

    # --- what step code can call on: snippets, credentials, sessions -----------------------------

    @lists(list_params(SnippetQuery), SnippetQuery.from_params)
    async def list_snippets(self, query: SnippetQuery) -> Answer:
        """List snippets (code step code calls with `await runSnippet(alias, args)`): {items, total, page,
        limit}; `q` matches alias or title."""
        services = self._services()
        found = await services.snippets.list(query)
        return Answer(shape.page_json(found, lambda item: shape.snippet_json(services.converter, item)))

    async def get_snippet(self, snippetId: SnippetId) -> Answer:
        """Read one snippet with its code (a function body with `args` bound; it may `return`)."""
        services = self._services()
        snippet = await services.snippets.get(parse_id(snippetId, "snippetId"))
        return Answer(shape.snippet_json(services.converter, snippet))

    @lists(list_params(CredentialQuery), CredentialQuery.from_params)
    async def list_credentials(self, query: CredentialQuery) -> Answer:
        """List credentials by name and username, never a secret (`hasSecret` says whether one is set):
        {items, total, page, limit}. Step code reads a credential linked to its scenario under an alias:
        `helpers.credentials[alias]`."""
        services = self._services()
        found = await services.credentials.list(query)
        return Answer(shape.page_json(found, lambda item: shape.credential_json(services.converter, item)))

    @lists(list_params(SessionQuery), SessionQuery.from_params)
    async def list_sessions(self, query: SessionQuery) -> Answer:
        """List browser sessions saved by runs (`saveSession`), tokens masked: {items, total, page, limit}.
        A run or authoring_start can start from one (`sessionId`)."""
        services = self._services()
        found = await services.sessions.list(query)
        return Answer(shape.page_json(found, lambda item: shape.session_json(services.converter, item)))

    async def delete_environment(self, environmentId: EnvironmentId) -> Answer:
        """Delete an environment; scenarios using it as their default are unlinked, its runs stay readable."""
        ident = parse_id(environmentId, "environmentId")
        await self._services().environments.delete(ident)
        return Answer({"id": str(ident), "deleted": True})

    # --- YAML and health --------------------------------------------------------------------------

    async def export_yaml(
        self, kind: Kind, ids: ExportIds = None, includeEnvironment: IncludeEnvironment = False
    ) -> Answer:
        """Export records as the YAML stream REST's export writes (never a secret): {kind, yaml}.

        kind `scenario`: the scenarios in `ids`, all when absent (with `includeEnvironment`, their
        environments too). Other kinds: the records in `ids`, one document each. Edit the text and give
        it to import_yaml to write it back.
        """
        idents = [parse_id(raw, f"ids[{i}]") for i, raw in enumerate(ids)] if ids is not None else None
        text = await self._services().transfer.export(kind, idents, include_environment=includeEnvironment)
        return Answer({"kind": kind, "yaml": text})

    async def import_yaml(self, kind: Kind, yaml: Yaml) -> Answer:
        """Import a YAML stream as REST's import of `kind` does: upsert by id, in one transaction (a bad
        document changes nothing): {created, updated, counts}. Scenario steps are replaced by the
        document's; step code is executed code, as in create_step."""
        report = await self._services().transfer.import_yaml(yaml, kind=kind)
        return Answer(report.to_json())

    async def get_health(self) -> Answer:
        """The service's health, as GET /health answers it: status, version, database, browser, sandbox."""
        return Answer(await self._health())

    # --- schedules ------------------------------------------------------------------------------

    @lists(list_params(ScheduleQuery), ScheduleQuery.from_params)
    async def list_schedules(self, query: ScheduleQuery) -> Answer:
        """List schedules, newest first, with when each fires next: {items, total, page, limit}."""
        services = self._services()
        found = await services.schedules.list(query)
        return Answer(shape.page_json(found, lambda item: shape.schedule_json(services.converter, item)))

    @takes(ScheduleInput, "schedule", _SCHEDULE_FIELDS)
    async def create_schedule(self, command: ScheduleInput) -> Answer:
        """Schedule a scenario on `cron` or `intervalSeconds`: each fire queues a run per environment.

        Each run executes the steps' code, as run_scenario does: only schedule code you trust.
        """
        services = self._services()
        schedule = await services.schedules.create(command)
        return Answer(shape.schedule_json(services.converter, schedule))

    @takes(ScheduleInput, "schedule", _SCHEDULE_FIELDS, patch=True, clear=("cron", "intervalSeconds"))
    async def update_schedule(self, scheduleId: ScheduleId, command: Patch[ScheduleInput]) -> Answer:
        """Change some fields of a schedule; `enabled: false` pauses it and `true` resumes it.

        To switch between `cron` and `intervalSeconds`, give the new one and clear the other.
        """
        services = self._services()
        schedule = await services.schedules.update(parse_id(scheduleId, "scheduleId"), command)
        return Answer(shape.schedule_json(services.converter, schedule))

    async def delete_schedule(self, scheduleId: ScheduleId) -> Answer:
        """Delete a schedule; the runs it queued stay."""
        ident = parse_id(scheduleId, "scheduleId")
        await self._services().schedules.delete(ident)
        return Answer({"id": str(ident), "deleted": True})

    # --- agent authoring (docs/authoring.md) -------------------------------------------------------

    @takes(
        AuthoringStartInput,
        "authoring session",
        ("environmentId", "scenarioId", "upToStep", "sessionId", "credentials"),
    )
    async def authoring_start(self, command: AuthoringStartInput) -> Answer:
        """Open a live browser (sandboxed like a run) on an environment: explore a site, keep what works.

        Optionally start from a saved session, and replay the first `upToStep` steps of `scenarioId` (to
        heal a scenario failing at step N: upToStep=N-1, read the failing run with get_run first).
        Returns {authoringId, url, title, snapshot, replayed, logs}: `snapshot` is Playwright's ARIA
        snapshot of the page (roles and names to build locators from). Next: authoring_exec.
        At most a few sessions live at once (409 beyond); an unused one closes after a while.
        """
        services = self._services()
        started = await services.authoring.start(command)
        return Answer(shape.authoring_started_json(services.converter, started))

    @takes(AuthoringExecInput, "exec", ("code", "screenshot", "title", "timeoutSeconds"))
    async def authoring_exec(self, authoringId: AuthoringId, command: AuthoringExecInput) -> Answer:
        """Execute step code in the session's live page. This is executed code: Python in a sandboxed worker.

        The code is a step: Python with top-level `await`, Playwright's async API, and `page`, `context`,
        `browser`, `expect`, `helpers` (`helpers.getEnvUrl()`, `helpers.env`, `helpers.credentials[alias]`
        with `.username`, `.secret`), `runSnippet`, `log`; names it binds stay for the next execs.
        Returns {index, ok, error: {kind, message} | null, logs, url, title, snapshot, live}; `snapshot`
        is the page's ARIA snapshot (`page.locator("body").aria_snapshot()`, cut at 20,000 characters).
        A failing exec leaves the session usable: fix the code and exec again. `live: false` means the
        session ended (its code crashed the worker or never yielded): start a new one.
        When done: authoring_save keeps the execs that passed (or those whose index is in `keep`).
        """
        services = self._services()
        outcome = await services.authoring.exec(parse_id(authoringId, "authoringId"), command)
        shot = outcome.page.screenshot if outcome.page is not None else None
        data = shape.authoring_exec_json(services.converter, outcome)
        return Answer(data, images=(shot,) if command.screenshot and shot else ())

    async def authoring_snapshot(self, authoringId: AuthoringId, screenshot: Screenshot = False) -> Answer:
        """Read the session's live page: {authoringId, url, title, snapshot, logs} (and an image when asked).

        `snapshot` is Playwright's ARIA snapshot of the page, cut at 20,000 characters.
        """
        services = self._services()
        look = await services.authoring.look(parse_id(authoringId, "authoringId"), screenshot=screenshot)
        shot = look.page.screenshot
        data = shape.authoring_look_json(services.converter, look)
        return Answer(data, images=(shot,) if screenshot and shot else ())

    @takes(AuthoringSaveInput, "save", ("name", "scenarioId", "keep", "message"))
    async def authoring_save(self, authoringId: AuthoringId, command: AuthoringSaveInput) -> Answer:
        """Save the session as scenario steps: the replayed steps, then the execs that passed (or `keep`).

        The steps are the exact code that ran, in order. Give `name` for a new scenario, or `scenarioId`
        (the scenario replayed) to replace its steps after `upToStep`. Returns the scenario with its
        `warnings` (as create_scenario); the session stays live. Next: run_scenario with wait=true to
        check it passes in a fresh browser.
        """
        services = self._services()
        scenario = await services.authoring.save(
            parse_id(authoringId, "authoringId"), command, origin=mcp_origin()
        )
        return Answer(shape.saved_scenario_json(services.converter, scenario))

    async def authoring_end(self, authoringId: AuthoringId) -> Answer:
        """End the session and close its browser (execs not saved are gone): {authoringId, ended: true}."""
        ident = parse_id(authoringId, "authoringId")
        await self._services().authoring.end(ident)
        return Answer({"authoringId": str(ident), "ended": True})
