"""The MCP tools (docs/mcp.md, "Tools"): each parses its arguments, calls the application service REST
calls, and shapes the result with the REST JSON views.

Validation belongs to the services. A parameter that goes into a request body the services check
(timeouts, orders, data, ids inside bodies) is declared ``Any`` with a JSON schema that documents it, so a
bad value is refused by the same rule, in the same words, as over REST. An id that names the record a tool
acts on is parsed here, as REST parses a path id. Only the parameters MCP alone has (``wait``,
``waitSeconds``, ``clear``) are checked by the SDK's argument model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field, WithJsonSchema

from scenariokit.domain.errors import ValidationError
from scenariokit.domain.model import DEFAULT_STEP_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, NAME_MAX, Run
from scenariokit.formats import presenters as shape
from scenariokit.formats.queries import MAX_LIMIT, EnvironmentQuery, LogQuery, ScenarioQuery
from scenariokit.services import Services

JSON = dict[str, Any]

#: How long ``run_scenario`` waits by default: under the 60 s request timeout common MCP clients use.
DEFAULT_WAIT_SECONDS = 50.0
MAX_WAIT_SECONDS = 600.0
#: How often a waiting ``run_scenario`` reads the run (any process may be executing it).
WAIT_POLL_SECONDS = 0.25

# --- parameters ---------------------------------------------------------------------------------

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
RunId = Annotated[
    str, Field(description="The run's id, a UUID (from run_scenario).", json_schema_extra=_UUID)
]
BodyEnvironmentId = Annotated[
    Any,
    WithJsonSchema({"type": "string", "format": "uuid"}),
    Field(description="Id (UUID) of the environment whose `data` the steps read through `helpers`."),
]
Name = Annotated[str, Field(description=f"A name of 1 to {NAME_MAX} characters.")]
NewName = Annotated[str | None, Field(description=f"A new name of 1 to {NAME_MAX} characters.")]
Description = Annotated[str | None, Field(description="Free text describing it.")]
Title = Annotated[str | None, Field(description="A short label for the step, shown in run results.")]
ExecCode = Annotated[
    str,
    Field(
        description=(
            "The step's code: Python with top-level `await`, using Playwright's async API. In scope: `page`, "
            "`context`, `browser`, `expect` (Playwright's assertions), `helpers` (`helpers.env` is the "
            "environment's data; `helpers.getEnvUrl(key=None)` returns data[key], else data['url'], else "
            "data['baseUrl']; `helpers.credentials[alias]` has `username` and `secret`), "
            "`await runSnippet(alias, args)` and `log(message)`; `print` also writes to the run log. "
            "A failed assertion or an exception fails the step. Example: "
            "`await page.goto(helpers.getEnvUrl())` then "
            "`await expect(page.get_by_text('Hello')).to_be_visible()` on the next line."
        )
    ),
]
_TIMEOUT = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_SECONDS}
StepTimeout = Annotated[
    Any,
    WithJsonSchema(_TIMEOUT),
    Field(
        description=f"The step's time limit in seconds: greater than 0, at most {MAX_TIMEOUT_SECONDS} "
        f"(default {DEFAULT_STEP_TIMEOUT_SECONDS:g}). A step over its limit fails the run with error "
        "kind `timeout`."
    ),
]
ScenarioTimeout = Annotated[
    Any,
    WithJsonSchema(_TIMEOUT),
    Field(
        description=f"The whole run's time limit in seconds: greater than 0, at most {MAX_TIMEOUT_SECONDS}. "
        "Without one a run may take the sum of its steps' limits."
    ),
]
Order = Annotated[
    Any,
    WithJsonSchema({"type": "integer", "minimum": 1}),
    Field(description="Position of the step, from 1; the steps from there on move down. Default: last."),
]
Steps = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "execCode": {"type": "string", "description": "The step's code (see create_step)."},
                    "title": {"type": "string"},
                    "order": {"type": "integer", "minimum": 1},
                    "timeoutSeconds": _TIMEOUT,
                },
                "required": ["execCode"],
            },
        }
    ),
    Field(description="The scenario's steps, run in `order` (else in the order given)."),
]
Data = Annotated[
    Any,
    WithJsonSchema({"type": "object"}),
    Field(
        description="Any JSON object the steps read as `helpers.env`; put the site's base URL under `url` "
        "for `helpers.getEnvUrl()`. An update replaces the whole object."
    ),
]
PageNumber = Annotated[
    Any,
    WithJsonSchema({"type": "integer", "minimum": 1}),
    Field(description="Page to return, from 1 (default 1)."),
]
PageSize = Annotated[
    Any,
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
    Field(description=f"Items per page, 1 to {MAX_LIMIT} (default 20)."),
]
LogPageSize = Annotated[
    Any,
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 1000}),
    Field(description="Log lines per page, 1 to 1000 (default 100)."),
]
ScenarioOrder = Annotated[
    Any,
    WithJsonSchema({"type": "string", "enum": list(ScenarioQuery.ORDER_BY)}),
    Field(description="Sort key (default updatedAt)."),
]
EnvironmentOrder = Annotated[
    Any,
    WithJsonSchema({"type": "string", "enum": list(EnvironmentQuery.ORDER_BY)}),
    Field(description="Sort key (default updatedAt)."),
]
OrderDir = Annotated[
    Any,
    WithJsonSchema({"type": "string", "enum": ["asc", "desc"]}),
    Field(description="Sort direction (default desc)."),
]
NameFilter = Annotated[str | None, Field(description="Only those whose name contains this text (any case).")]
LogFilter = Annotated[str | None, Field(description="Only the log lines that contain this text (any case).")]
SaveSession = Annotated[
    Any,
    WithJsonSchema({"type": "boolean"}),
    Field(
        description="Keep the browser session (cookies, localStorage) as session `run-<runId>` when the "
        "run ends."
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
ScenarioClear = Annotated[
    list[Literal["description", "environmentId", "timeoutSeconds"]] | None,
    Field(description="Fields to remove (set to null). Fields neither given nor listed keep their value."),
]
StepClear = Annotated[
    list[Literal["title", "timeoutSeconds"]] | None,
    Field(description="Fields to remove (set to null). Fields neither given nor listed keep their value."),
]
EnvironmentClear = Annotated[
    list[Literal["description"]] | None,
    Field(description="Fields to remove (set to null). Fields neither given nor listed keep their value."),
]

# --- answers and arguments ---------------------------------------------------------------------


@attrs.frozen
class Answer:
    """What a tool answers: a JSON shape of the REST API, and notes for the reader that come first."""

    data: JSON
    notes: tuple[str, ...] = ()


def parse_id(raw: str, name: str) -> uuid.UUID:
    """The UUID naming the record a tool acts on; a ValidationError naming ``name`` otherwise."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise ValidationError(f"{name} must be a UUID", {name: f"{raw!r} is not a UUID"}) from None


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


# --- tools --------------------------------------------------------------------------------------


class ScenarioKitTools:
    """The tools, over the services ``services()`` returns when a tool is called.

    Each public coroutine is one tool: its name is the tool's, its docstring the tool's description and
    its parameters the tool's arguments. A domain error it raises is answered by the caller.
    """

    def __init__(
        self, services: Callable[[], Services], trace_link: Callable[[Run], str | None] | None = None
    ) -> None:
        self._services = services
        #: where the server's trace viewer opens a run's trace (``traceViewerUrl``, as REST answers it)
        self._trace_link = trace_link or (lambda run: None)

    async def list_scenarios(
        self,
        page: PageNumber = None,
        limit: PageSize = None,
        orderBy: ScenarioOrder = None,
        orderDir: OrderDir = None,
        q: NameFilter = None,
    ) -> Answer:
        """List scenarios with their steps, latest change first: {items, total, page, limit}."""
        services = self._services()
        query = ScenarioQuery.from_params(
            query_params(page=page, limit=limit, orderBy=orderBy, orderDir=orderDir, q=q)
        )
        found = await services.scenarios.list(query)
        return Answer(shape.page_json(found, lambda item: shape.scenario_json(services.converter, item)))

    async def get_scenario(self, scenarioId: ScenarioId) -> Answer:
        """Read one scenario with its steps (in order) and credential links."""
        services = self._services()
        scenario = await services.scenarios.get(parse_id(scenarioId, "scenarioId"))
        return Answer(shape.scenario_json(services.converter, scenario))

    async def create_scenario(
        self,
        name: Name,
        description: Description = None,
        environmentId: BodyEnvironmentId = None,
        timeoutSeconds: ScenarioTimeout = None,
        steps: Steps = None,
    ) -> Answer:
        """Create a scenario, with its steps when given. Returns the scenario with its id and step ids."""
        services = self._services()
        body = given(
            name=name,
            description=description,
            environmentId=environmentId,
            timeoutSeconds=timeoutSeconds,
            steps=steps,
        )
        scenario = await services.scenarios.create(body)
        return Answer(shape.scenario_json(services.converter, scenario))

    async def update_scenario(
        self,
        scenarioId: ScenarioId,
        name: NewName = None,
        description: Description = None,
        environmentId: BodyEnvironmentId = None,
        timeoutSeconds: ScenarioTimeout = None,
        clear: ScenarioClear = None,
    ) -> Answer:
        """Change some fields of a scenario (its steps are changed with the step tools)."""
        services = self._services()
        fields = {"name": name, "description": description, "environmentId": environmentId}
        body = changes(fields | {"timeoutSeconds": timeoutSeconds}, clear)
        scenario = await services.scenarios.update(parse_id(scenarioId, "scenarioId"), body)
        return Answer(shape.scenario_json(services.converter, scenario))

    async def delete_scenario(self, scenarioId: ScenarioId) -> Answer:
        """Delete a scenario with its steps, credential links and finished runs (refused while one runs)."""
        ident = parse_id(scenarioId, "scenarioId")
        await self._services().scenarios.delete(ident)
        return Answer({"id": str(ident), "deleted": True})

    async def create_step(
        self,
        scenarioId: ScenarioId,
        execCode: ExecCode,
        title: Title = None,
        order: Order = None,
        timeoutSeconds: StepTimeout = None,
    ) -> Answer:
        """Add a step to a scenario: at `order` when given, else last. Returns the step with its id.

        `execCode` is executed code: Python that every run of the scenario executes in a worker process.
        """
        services = self._services()
        body = given(execCode=execCode, title=title, order=order, timeoutSeconds=timeoutSeconds)
        step = await services.scenarios.add_step(parse_id(scenarioId, "scenarioId"), body)
        return Answer(shape.step_json(services.converter, step))

    async def update_step(
        self,
        scenarioId: ScenarioId,
        stepId: StepId,
        execCode: Annotated[str | None, Field(description="The step's new code (see create_step).")] = None,
        title: Title = None,
        order: Order = None,
        timeoutSeconds: StepTimeout = None,
        clear: StepClear = None,
    ) -> Answer:
        """Change some fields of a step; a new `order` moves it.

        `execCode` is executed code, as in create_step: every later run of the scenario executes it.
        """
        services = self._services()
        body = changes(
            given(execCode=execCode, title=title, order=order, timeoutSeconds=timeoutSeconds), clear
        )
        step = await services.scenarios.update_step(
            parse_id(scenarioId, "scenarioId"), parse_id(stepId, "stepId"), body
        )
        return Answer(shape.step_json(services.converter, step))

    async def delete_step(self, scenarioId: ScenarioId, stepId: StepId) -> Answer:
        """Delete a step; the steps after it move up."""
        ident = parse_id(stepId, "stepId")
        await self._services().scenarios.delete_step(parse_id(scenarioId, "scenarioId"), ident)
        return Answer({"id": str(ident), "deleted": True})

    async def list_environments(
        self,
        page: PageNumber = None,
        limit: PageSize = None,
        orderBy: EnvironmentOrder = None,
        orderDir: OrderDir = None,
        q: NameFilter = None,
    ) -> Answer:
        """List environments (data the steps read, e.g. the site's URL): {items, total, page, limit}."""
        services = self._services()
        query = EnvironmentQuery.from_params(
            query_params(page=page, limit=limit, orderBy=orderBy, orderDir=orderDir, q=q)
        )
        found = await services.environments.list(query)
        return Answer(shape.page_json(found, lambda item: shape.environment_json(services.converter, item)))

    async def create_environment(
        self, name: Name, description: Description = None, data: Data = None
    ) -> Answer:
        """Create an environment: the data a run's steps read, e.g. {"url": "https://staging.example.com"}."""
        services = self._services()
        environment = await services.environments.create(given(name=name, description=description, data=data))
        return Answer(shape.environment_json(services.converter, environment))

    async def update_environment(
        self,
        environmentId: EnvironmentId,
        name: NewName = None,
        description: Description = None,
        data: Data = None,
        clear: EnvironmentClear = None,
    ) -> Answer:
        """Change some fields of an environment; `data`, when given, replaces the stored object."""
        services = self._services()
        body = changes({"name": name, "description": description, "data": data}, clear)
        environment = await services.environments.update(parse_id(environmentId, "environmentId"), body)
        return Answer(shape.environment_json(services.converter, environment))

    async def run_scenario(
        self,
        scenarioId: Annotated[
            Any,
            WithJsonSchema({"type": "string", "format": "uuid"}),
            Field(description="Id (UUID) of the scenario to run."),
        ],
        environmentId: BodyEnvironmentId,
        saveSession: SaveSession = False,
        wait: Wait = False,
        waitSeconds: WaitSeconds = DEFAULT_WAIT_SECONDS,
    ) -> Answer:
        """Run a scenario in a fresh Chromium against an environment; the run starts `in_progress`.

        Running executes the steps' code (Python) in a sandboxed worker process: only run code you trust.

        With `wait` the call returns once the run is `pass` or `fail`, with step results, error and log.
        """
        services = self._services()
        run = await services.runs.create(
            given(scenarioId=scenarioId, environmentId=environmentId, saveSession=saveSession)
        )
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

    async def get_run(
        self, runId: RunId, q: LogFilter = None, page: PageNumber = None, limit: LogPageSize = None
    ) -> Answer:
        """Read a run: status, error, step results, environment, saved session, and a page of its log."""
        services = self._services()
        logs = LogQuery.from_params(query_params(page=page, limit=limit, q=q))
        detail = await services.runs.get(parse_id(runId, "runId"), logs)
        return Answer(
            shape.run_detail_json(services.converter, detail, trace_viewer_url=self._trace_link(detail.run))
        )
