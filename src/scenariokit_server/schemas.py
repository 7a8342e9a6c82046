"""Marshmallow schemas of the OpenAPI document, generated from the attrs classes.

Each shape is stated once, on its attrs class: :mod:`scenariokit.domain.model` for responses and
:mod:`scenariokit.formats.inputs` for requests. :func:`schema_of` walks ``attrs.fields`` and the type
hints and carries the attrs validators over as marshmallow validators, so the document shows the same
bounds the converter enforces, and a field's ``description`` from its attrs metadata. The adjustments
below mirror :mod:`scenariokit.formats.presenters` (what a response hides or adds). These schemas
document; they validate nothing: the converter does.

The MCP tool parameters are the same schemas again (:func:`json_schema_of`, through apispec's own
converter), so a tool states the bounds, required fields and descriptions REST states.
"""

from __future__ import annotations

import datetime
import enum
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin, OpenAPIConverter
from marshmallow import Schema, fields, validate

from scenariokit.domain import audit as audit_model
from scenariokit.domain import browser as browser_model
from scenariokit.domain import code, model, revisions
from scenariokit.domain import schedule as schedule_model
from scenariokit.domain.authoring import MAX_EXEC_CODE_CHARS
from scenariokit.formats import inputs
from scenariokit.services.transfer import ACCEPTED_KINDS

#: A name or title: some character other than white space (``str.strip`` leaves it), and no NUL.
NOT_BLANK_TEXT = r"^[^\x00]*[^\s\x00][^\x00]*$"

#: The attrs validators of the model, as marshmallow validators plus the JSON Schema words they need.
_VALIDATORS: dict[
    Callable[..., Any], tuple[validate.Validator | tuple[validate.Validator, ...], dict[str, Any]]
] = {
    # "not blank" as a pattern that holds STORABLE_TEXT's "no NUL" too (a pattern replaces that one)
    model.required_text: ((validate.Length(min=1, max=model.NAME_MAX), validate.Regexp(NOT_BLANK_TEXT)), {}),
    model.valid_timeout: (
        validate.Range(min=0, max=model.MAX_TIMEOUT_SECONDS, min_inclusive=False),
        {"exclusiveMinimum": True},
    ),
    model.valid_order: (validate.Range(min=1), {}),
    model.valid_alias: (validate.Regexp(model.ALIAS_PATTERN.pattern), {}),
    model.valid_retry_count: (validate.Range(min=0, max=model.MAX_RETRIES), {}),
    model.valid_backoff_seconds: (validate.Range(min=0, max=model.MAX_BACKOFF_SECONDS), {}),
    browser_model.valid_viewport_side: (validate.Range(min=1, max=browser_model.MAX_VIEWPORT), {}),
    browser_model.valid_latitude: (validate.Range(min=-90, max=90), {}),
    browser_model.valid_longitude: (validate.Range(min=-180, max=180), {}),
    browser_model.valid_accuracy: (validate.Range(min=0, max=1_000_000), {}),
    inputs.valid_environment_ids: (validate.Length(min=1, max=inputs.MAX_BATCH_ENVIRONMENTS), {}),
    schedule_model.valid_interval: (validate.Range(min=1, max=schedule_model.MAX_INTERVAL_SECONDS), {}),
    inputs.at_least_zero: (validate.Range(min=0), {}),
    inputs.optional_name: (validate.Length(min=1, max=model.NAME_MAX), {}),
    inputs.short_code: (validate.Length(max=MAX_EXEC_CODE_CHARS), {}),
    revisions.valid_message: (validate.Length(max=revisions.MESSAGE_MAX), {}),
}


def _validators(field: attrs.Attribute[Any]) -> tuple[list[validate.Validator], dict[str, Any]]:
    found: list[validate.Validator] = []
    metadata: dict[str, Any] = {}
    pending: list[Any] = [field.validator]
    while pending:
        item = pending.pop()
        if item is None:
            continue
        pending.extend(getattr(item, "_validators", ()))  # attrs.validators.and_
        pending.append(getattr(item, "validator", None))  # attrs.validators.optional
        if item in _VALIDATORS:
            validators, words = _VALIDATORS[item]
            found.extend(validators if isinstance(validators, tuple) else (validators,))
            metadata.update(words)
    return found, metadata


#: What every stored string must match: no NUL (PostgreSQL refuses it; the converter does too).
STORABLE_TEXT = r"^[^\x00]*$"


def _field_of(hint: Any, nested: Mapping[type, type[Schema]], **options: Any) -> fields.Field:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _field_of(inner, nested, allow_none=True, **options)
    if origin is tuple:
        return fields.List(_field_of(args[0], nested), **options)
    if origin is dict or hint is dict:
        return fields.Dict(keys=fields.String(), **options)
    if attrs.has(hint):
        return fields.Nested(nested[hint], **options)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        options["validate"] = [
            validate.OneOf([member.value for member in hint]),
            *(options.get("validate") or ()),
        ]
        return fields.String(**options)
    simple: dict[Any, type[fields.Field]] = {
        uuid.UUID: fields.UUID,
        datetime.datetime: fields.DateTime,
        bool: fields.Boolean,
        int: fields.Integer,
        float: fields.Float,
        str: fields.String,
    }
    patterned = any(isinstance(rule, validate.Regexp) for rule in options.get("validate") or ())
    if hint is str and not patterned:
        options["metadata"] = {**options.get("metadata", {}), "pattern": STORABLE_TEXT}
    return simple.get(hint, fields.Raw)(**options)


def schema_of(
    cls: type,
    *,
    name: str | None = None,
    response: bool = False,
    exclude: tuple[str, ...] = (),
    extra: Mapping[str, fields.Field] | None = None,
    nested: Mapping[type, type[Schema]] | None = None,
) -> type[Schema]:
    """A schema of an attrs class with camelCase keys, named ``name`` (default: the class name).

    In a response every field is present (``required``); in a request the fields without a default are.
    """
    hints = typing.get_type_hints(cls)
    declared: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if field.name in exclude:
            continue
        validators, metadata = _validators(field)
        if "description" in field.metadata:
            metadata["description"] = field.metadata["description"]
        declared[field.name] = _field_of(
            hints[field.name],
            nested or {},
            data_key=model.camel(field.name),
            required=response or field.default is attrs.NOTHING,
            validate=validators or None,
            metadata=metadata,
        )
    declared.update(extra or {})
    return type(f"{name or cls.__name__}Schema", (Schema,), declared)


def page_of(item: type[Schema], name: str) -> type[Schema]:
    """The paged list envelope of ``item``: ``items``, ``total``, ``page``, ``limit``."""
    return Schema.from_dict(
        {
            "items": fields.List(fields.Nested(item), required=True),
            "total": fields.Integer(required=True, validate=validate.Range(min=0)),
            "page": fields.Integer(required=True, validate=validate.Range(min=1)),
            "limit": fields.Integer(required=True, validate=validate.Range(min=1)),
        },
        name=f"{name}Schema",
    )


# --- responses ------------------------------------------------------------------------------------

Step = schema_of(model.Step, response=True)
CredentialLink = schema_of(model.CredentialLink, response=True)
Retries = schema_of(model.Retries, response=True)
# Browser settings read as they are written: a key not set is absent (requests and responses alike).
Viewport = schema_of(browser_model.Viewport)
Geolocation = schema_of(browser_model.Geolocation)
HttpCredentials = schema_of(browser_model.HttpCredentials)
BrowserSettings = schema_of(
    browser_model.BrowserSettings,
    nested={
        browser_model.Viewport: Viewport,
        browser_model.Geolocation: Geolocation,
        browser_model.HttpCredentials: HttpCredentials,
    },
)
_BROWSER: dict[type, type[Schema]] = {browser_model.BrowserSettings: BrowserSettings}
Scenario = schema_of(
    model.Scenario,
    response=True,
    nested={model.Step: Step, model.CredentialLink: CredentialLink, model.Retries: Retries, **_BROWSER},
)
Environment = schema_of(model.Environment, response=True, nested=_BROWSER)
Devices = Schema.from_dict(
    {
        "items": fields.List(
            fields.String(),
            required=True,
            metadata={"description": "the device names the installed Playwright knows, sorted"},
        ),
        "total": fields.Integer(required=True, validate=validate.Range(min=0)),
    },
    name="DevicesSchema",
)
StepCodeWarning = schema_of(code.StepCodeWarning, response=True)


def _with_warnings(what: str) -> dict[str, fields.Field]:
    return {
        "warnings": fields.List(
            fields.Nested(StepCodeWarning),
            required=True,
            metadata={
                "description": f"lines of {what} code that call a Playwright coroutine without `await` "
                "(the call never runs; a run fails such a step): reported, not refused "
                "(docs/step-code.md, Common mistakes)"
            },
        )
    }


ScenarioSaved = schema_of(
    model.Scenario,
    name="ScenarioSaved",
    response=True,
    nested={model.Step: Step, model.CredentialLink: CredentialLink, model.Retries: Retries, **_BROWSER},
    extra=_with_warnings("the steps'"),
)
StepSaved = schema_of(model.Step, name="StepSaved", response=True, extra=_with_warnings("the step's"))
Credential = schema_of(
    model.Credential,
    response=True,
    exclude=("secret",),
    extra={"has_secret": fields.Boolean(required=True, data_key="hasSecret")},
)
Snippet = schema_of(model.Snippet, response=True)
Session = schema_of(
    model.Session,
    response=True,
    exclude=("storage_state", "token"),
    extra={
        "token": fields.String(
            required=True,
            allow_none=True,
            metadata={
                "description": "masked: the first and last 4 characters around '…'; '…' alone when short"
            },
        )
    },
)
RunError = schema_of(model.RunError, response=True)
StepResult = schema_of(model.StepResult, response=True)
RunAttempt = schema_of(
    model.RunAttempt, response=True, nested={model.RunError: RunError, model.StepResult: StepResult}
)
StepTiming = schema_of(model.StepTiming, response=True)
RunTimings = schema_of(model.RunTimings, response=True, nested={model.StepTiming: StepTiming})
ScenarioRef = Schema.from_dict(
    {"id": fields.UUID(required=True), "name": fields.String(required=True)}, name="ScenarioRefSchema"
)
LogEntry = schema_of(model.RunLogEntry, name="LogEntry", response=True, exclude=("run_id",))
Artifact = Schema.from_dict(
    {
        "name": fields.String(required=True, metadata={"description": "the file name"}),
        "url": fields.String(
            required=True, metadata={"description": "where GET /api/v1/run/{id}/artifacts/{name} serves it"}
        ),
        "content_type": fields.String(required=True, data_key="contentType"),
    },
    name="ArtifactSchema",
)
LogPage = page_of(LogEntry, "LogPage")
_RUN_VIEW_FIELDS = {
    "scenario": fields.Nested(ScenarioRef, required=True),
    "duration_ms": fields.Integer(required=True, allow_none=True, data_key="durationMs"),
    "environment": fields.Nested(Environment, required=True, allow_none=True),
    "session": fields.Nested(Session, required=True, allow_none=True),
    "from_session_id": fields.UUID(
        data_key="fromSessionId", metadata={"description": "the saved session the run started from"}
    ),
    "artifacts": fields.List(
        fields.Nested(Artifact),
        required=True,
        metadata={"description": "the screenshots (PNG), trace (zip) and videos (WebM) the run recorded"},
    ),
}
Run = schema_of(
    model.Run,
    response=True,
    exclude=("scenario_name", "source_session_id", "timings"),
    extra=_RUN_VIEW_FIELDS,
    nested={
        model.RunError: RunError,
        model.StepResult: StepResult,
        model.RunAttempt: RunAttempt,
        **_BROWSER,
    },
)
RunDetail = schema_of(
    model.Run,
    name="RunDetail",
    response=True,
    exclude=("scenario_name", "source_session_id"),
    extra={
        **_RUN_VIEW_FIELDS,
        "logs": fields.Nested(LogPage, required=True),
        "trace_viewer_url": fields.String(
            required=True,
            allow_none=True,
            data_key="traceViewerUrl",
            metadata={
                "description": "opens the run's trace in the trace viewer this server serves at /trace/ "
                "(with tokens set, the trace link in it is signed and expires; docs/reports.md); null "
                "when the run recorded no trace"
            },
        ),
        "timings": fields.Nested(
            RunTimings,
            required=True,
            allow_none=True,
            metadata={
                "description": "where the run's time went, in ms per phase (null phases did not happen); "
                "null until a scheduler has executed the run (see docs/rest.md, Run timings)"
            },
        ),
    },
    nested={
        model.RunError: RunError,
        model.StepResult: StepResult,
        model.RunTimings: RunTimings,
        model.RunAttempt: RunAttempt,
        **_BROWSER,
    },
)
RunBatch = Schema.from_dict(
    {
        "batchId": fields.UUID(
            required=True, metadata={"description": "lists them: GET /api/v1/run?batchId="}
        ),
        "runs": fields.List(
            fields.Nested(Run),
            required=True,
            metadata={"description": "one run per environment, as lists show runs; only a batch has `runs`"},
        ),
    },
    name="RunBatchSchema",
)
LastFailure = schema_of(model.LastFailure, response=True)
LastPass = schema_of(model.LastPass, response=True)


def _rate(description: str) -> fields.Float:
    return fields.Float(
        required=True,
        allow_none=True,
        validate=validate.Range(min=0, max=1),
        metadata={"description": description},
    )


RunStats = Schema.from_dict(
    {
        "runs": fields.Integer(required=True, metadata={"description": "finished runs in the window"}),
        "passed": fields.Integer(required=True),
        "failed": fields.Integer(required=True),
        "flaky": fields.Integer(required=True, metadata={"description": "passed after a failed attempt"}),
        "passRate": _rate("passed / runs; null without runs"),
        "flakyRate": _rate("flaky / runs; null without runs"),
        "durationMs": fields.Nested(
            Schema.from_dict(
                {
                    "p50": fields.Integer(required=True, allow_none=True),
                    "p95": fields.Integer(required=True, allow_none=True),
                },
                name="DurationPercentilesSchema",
            ),
            required=True,
            metadata={"description": "nearest-rank percentiles of run durations; null without runs"},
        ),
        "lastFailure": fields.Nested(LastFailure, required=True, allow_none=True),
        "lastPass": fields.Nested(
            LastPass,
            required=True,
            allow_none=True,
            metadata={"description": "the latest passing run, whenever it ran, and the revision it executed"},
        ),
        "changedSinceLastPass": fields.Boolean(
            required=True,
            metadata={
                "description": "the scenario's revision now differs from the one its last pass executed "
                "(false when no run passed)"
            },
        ),
    },
    name="RunStatsSchema",
)

# --- revisions (docs/revisions.md) ------------------------------------------------------------------

RevisionInfo = Schema.from_dict(
    {
        "number": fields.Integer(
            required=True, validate=validate.Range(min=1), metadata={"description": "1, 2, … per scenario"}
        ),
        "createdAt": fields.DateTime(required=True),
        "source": fields.String(
            required=True,
            validate=validate.OneOf([source.value for source in revisions.RevisionSource]),
            metadata={"description": "the door the change came through"},
        ),
        "tokenName": fields.String(
            required=True,
            allow_none=True,
            metadata={"description": "the API token's name, when tokens have names"},
        ),
        "message": fields.String(required=True, allow_none=True),
        "contentHash": fields.String(
            required=True, metadata={"description": "SHA-256 of the scenario's content at this revision"}
        ),
    },
    name="RevisionInfoSchema",
)
RevisionPage = page_of(RevisionInfo, "RevisionPage")
Revision = Schema.from_dict(
    {
        **{name: field for name, field in RevisionInfo().declared_fields.items()},
        "scenario": fields.Nested(
            Schema.from_dict(
                {
                    "id": fields.UUID(required=True),
                    "name": fields.String(required=True),
                    "description": fields.String(required=True, allow_none=True),
                    "environmentId": fields.UUID(required=True, allow_none=True),
                    "timeoutSeconds": fields.Float(required=True, allow_none=True),
                    "retries": fields.Nested(Retries, required=True),
                    "credentials": fields.List(fields.Nested(CredentialLink), required=True),
                    "steps": fields.List(fields.Nested(Step), required=True),
                },
                name="RevisionScenarioSchema",
            ),
            required=True,
            metadata={"description": "the whole scenario as this revision holds it"},
        ),
    },
    name="RevisionSchema",
)
RevisionDiff = Schema.from_dict(
    {
        "from": fields.Integer(required=True),
        "to": fields.Integer(required=True),
        "fields": fields.Dict(
            keys=fields.String(),
            values=fields.List(fields.Raw()),
            required=True,
            metadata={"description": "each field that differs: [old, new]"},
        ),
        "steps": fields.List(
            fields.Nested(
                Schema.from_dict(
                    {
                        "order": fields.Integer(
                            required=True,
                            metadata={"description": "in `to` (in `from` for a removed step)"},
                        ),
                        "change": fields.String(
                            required=True, validate=validate.OneOf(["added", "removed", "changed"])
                        ),
                        "diff": fields.String(
                            required=True,
                            metadata={"description": "unified diff of the step's fields and execCode"},
                        ),
                        "stepId": fields.UUID(required=True),
                        "title": fields.String(required=True, allow_none=True),
                        "fromOrder": fields.Integer(required=True, allow_none=True),
                        "toOrder": fields.Integer(required=True, allow_none=True),
                        "moved": fields.Boolean(
                            required=True,
                            metadata={"description": "its place among the other steps changed (a reorder)"},
                        ),
                    },
                    name="StepChangeSchema",
                )
            ),
            required=True,
            metadata={"description": "steps added, removed or changed, matched by step id"},
        ),
    },
    name="RevisionDiffSchema",
)
Schedule = schema_of(schedule_model.Schedule, response=True)
SchedulePage = page_of(Schedule, "SchedulePage")
AuditEntry = schema_of(audit_model.AuditEntry, response=True)
AuditPage = page_of(AuditEntry, "AuditPage")
ScenarioPage = page_of(Scenario, "ScenarioPage")
EnvironmentPage = page_of(Environment, "EnvironmentPage")
CredentialPage = page_of(Credential, "CredentialPage")
SnippetPage = page_of(Snippet, "SnippetPage")
SessionPage = page_of(Session, "SessionPage")
RunPage = page_of(Run, "RunPage")


ImportReport = Schema.from_dict(
    {
        "created": fields.Dict(
            keys=fields.String(),
            values=fields.List(fields.UUID()),
            required=True,
            metadata={"description": "ids created, per kind"},
        ),
        "updated": fields.Dict(
            keys=fields.String(),
            values=fields.List(fields.UUID()),
            required=True,
            metadata={"description": "ids overwritten, per kind"},
        ),
        "counts": fields.Nested(
            Schema.from_dict(
                {"created": fields.Integer(required=True), "updated": fields.Integer(required=True)},
                name="ImportCountsSchema",
            ),
            required=True,
        ),
        **_with_warnings("the imported scenarios' step"),
    },
    name="ImportReportSchema",
)
Problem = Schema.from_dict(
    {
        "type": fields.String(required=True),
        "title": fields.String(required=True),
        "status": fields.Integer(required=True),
        "detail": fields.String(required=True),
        "errors": fields.Dict(
            keys=fields.String(),
            values=fields.String(),
            metadata={"description": "what is wrong with each field, by its JSON path or parameter name"},
        ),
    },
    name="ProblemSchema",
)
Health = Schema.from_dict(
    {
        "status": fields.String(
            required=True,
            validate=validate.OneOf(["ok", "degraded", "draining"]),
            metadata={
                "description": "`draining` (503) once the server was asked to stop: it claims no "
                "more runs and lets those under way finish (docs/deployment.md)"
            },
        ),
        "version": fields.String(required=True),
        "database": fields.String(required=True, validate=validate.OneOf(["ok", "unreachable"])),
        "browser": fields.String(required=True, validate=validate.OneOf(["ok", "missing"])),
        "sandbox": fields.String(required=True, validate=validate.OneOf(["bubblewrap", "none"])),
        "run_groups": fields.List(
            fields.String(validate=validate.OneOf(["memory", "pids"])),
            required=True,
            data_key="runGroups",
            metadata={
                "description": "the limits of each run's control group, over its worker, driver and "
                "browser (docs/security.md); empty where this machine gives the service none"
            },
        ),
        "left_out": fields.List(
            fields.String(),
            required=True,
            data_key="leftOut",
            metadata={
                "description": "what this machine could not give the workers, each in words (bubblewrap, "
                "control groups, the zygotes, /proc), as the start-up log says it (docs/deployment.md); "
                "empty when nothing was left out"
            },
        ),
        "browser_build": fields.String(
            required=True,
            allow_none=True,
            data_key="browserBuild",
            metadata={"description": "the build runs use: kind, version and path; null when none"},
        ),
    },
    name="HealthSchema",
)

AuthoringLog = Schema.from_dict(
    {"at": fields.DateTime(required=True), "level": fields.String(required=True),
     "message": fields.String(required=True)},
    name="AuthoringLogSchema",
)  # fmt: skip
_PAGE_FIELDS: dict[str, fields.Field] = {
    "url": fields.String(required=True, allow_none=True, metadata={"description": "the page's URL"}),
    "title": fields.String(required=True, allow_none=True),
    "snapshot": fields.String(
        required=True,
        allow_none=True,
        metadata={
            "description": "Playwright's ARIA snapshot of the page (`page.locator('body').aria_snapshot()`), "
            "cut at 20,000 characters; secrets masked"
        },
    ),
    "screenshot": fields.String(
        allow_none=True,
        metadata={"description": "a PNG of the page, base64; only when asked for (`screenshot`)"},
    ),
    "logs": fields.List(
        fields.Nested(AuthoringLog),
        required=True,
        metadata={"description": "log lines since the last answer"},
    ),
}
AuthoringStart = Schema.from_dict(
    {
        "authoring_id": fields.UUID(required=True, data_key="authoringId"),
        **_PAGE_FIELDS,
        "replayed": fields.List(
            fields.Nested(StepResult), required=True, metadata={"description": "the replayed steps' results"}
        ),
    },
    name="AuthoringStartSchema",
)
AuthoringPage = Schema.from_dict(
    {"authoring_id": fields.UUID(required=True, data_key="authoringId"), **_PAGE_FIELDS},
    name="AuthoringPageSchema",
)
AuthoringExec = Schema.from_dict(
    {
        "index": fields.Integer(
            required=True, metadata={"description": "the exec's number in the session, from 1 (for `keep`)"}
        ),
        "ok": fields.Boolean(required=True),
        "error": fields.Nested(
            Schema.from_dict(
                {"kind": fields.String(required=True), "message": fields.String(required=True)},
                name="AuthoringErrorSchema",
            ),
            required=True,
            allow_none=True,
        ),
        **_PAGE_FIELDS,
        "live": fields.Boolean(
            required=True, metadata={"description": "false when this exec ended the session"}
        ),
    },
    name="AuthoringExecSchema",
)

# --- answers only MCP gives ------------------------------------------------------------------------

Deleted = Schema.from_dict(
    {"id": fields.UUID(required=True), "deleted": fields.Boolean(required=True)}, name="DeletedSchema"
)
AuthoringEnded = Schema.from_dict(
    {
        "authoring_id": fields.UUID(required=True, data_key="authoringId"),
        "ended": fields.Boolean(required=True),
    },
    name="AuthoringEndedSchema",
)
YamlExport = Schema.from_dict(
    {
        "kind": fields.String(
            required=True,
            validate=validate.OneOf(list(ACCEPTED_KINDS)),
        ),
        "yaml": fields.String(
            required=True,
            metadata={"description": "the YAML stream REST's export of the same records answers"},
        ),
    },
    name="YamlExportSchema",
)

# --- requests ---------------------------------------------------------------------------------------

StepInput = schema_of(inputs.StepInput)
LinkInput = schema_of(inputs.LinkInput)
RetriesInput = schema_of(model.Retries, name="RetriesInput")
ScenarioInput = schema_of(
    inputs.ScenarioInput,
    nested={
        inputs.StepInput: StepInput,
        inputs.LinkInput: LinkInput,
        model.Retries: RetriesInput,
        **_BROWSER,
    },
)
StepOrderInput = schema_of(inputs.StepOrderInput)
EnvironmentInput = schema_of(inputs.EnvironmentInput, nested=_BROWSER)
CredentialInput = schema_of(
    inputs.CredentialInput,
    exclude=("secret",),
    extra={
        "secret": fields.String(
            allow_none=True,
            load_only=True,
            metadata={
                "description": "write-only; omitted or null on update keeps the stored secret, '' clears it"
            },
        )
    },
)
SnippetInput = schema_of(inputs.SnippetInput)
#: RunInput as its attrs class states it; REST's body adds the ``scenario`` alias (below), MCP does not.
RunCommand = schema_of(inputs.RunInput, name="RunCommand")
RunInput = schema_of(
    inputs.RunInput,
    exclude=("scenario_id",),
    extra={
        "scenario_id": fields.UUID(
            data_key="scenarioId",
            metadata={
                "description": attrs.fields(inputs.RunInput).scenario_id.metadata["description"]
                + " Required unless `scenario` is given."
            },
        ),
        "scenario": fields.Raw(
            metadata={
                "description": "the same as `scenarioId`: the id, or the `{id, name}` object a run answers",
                "oneOf": [
                    {"type": "string", "format": "uuid"},
                    {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "format": "uuid"},
                            "name": {"type": "string"},
                        },
                        "required": ["id"],
                        "additionalProperties": False,
                    },
                ],
            }
        ),
    },
)

RunBatchInput = schema_of(inputs.RunBatchInput)
ScheduleInput = schema_of(inputs.ScheduleInput)
AuthoringStartInput = schema_of(inputs.AuthoringStartInput, nested={inputs.LinkInput: LinkInput})
AuthoringExecInput = schema_of(inputs.AuthoringExecInput)
AuthoringSaveInput = schema_of(inputs.AuthoringSaveInput)

#: The request schema of each input class, as its attrs class states it.
REQUESTS: dict[type, type[Schema]] = {
    inputs.StepInput: StepInput,
    inputs.LinkInput: LinkInput,
    inputs.ScenarioInput: ScenarioInput,
    inputs.StepOrderInput: StepOrderInput,
    inputs.EnvironmentInput: EnvironmentInput,
    inputs.CredentialInput: CredentialInput,
    inputs.SnippetInput: SnippetInput,
    inputs.RunInput: RunCommand,
    inputs.RunBatchInput: RunBatchInput,
    inputs.ScheduleInput: ScheduleInput,
    inputs.AuthoringStartInput: AuthoringStartInput,
    inputs.AuthoringExecInput: AuthoringExecInput,
    inputs.AuthoringSaveInput: AuthoringSaveInput,
}

OPENAPI_VERSION = "3.0.3"


class _Converter(OpenAPIConverter):
    """apispec's converter, with a nullable nested object said as client generators read it."""

    def field2nullable(self, field: fields.Field, ret: dict[str, Any]) -> dict[str, Any]:
        """``nullable: true`` beside ``allOf: [{"$ref": …}]`` for a nested object that may be null.

        apispec says it ``anyOf: [{"type": "object", "nullable": true}, {"$ref": …}]``, which
        openapi-typescript, openapi-python-client and openapi-generator all read as "an empty object,
        null, or the thing" (a phantom ``Record<string, never>``). ``nullable`` beside a one-item
        ``allOf`` is the OpenAPI 3.0 form they (and schemathesis) read as "null or the thing".
        """
        if not field.allow_none or ("$ref" not in ret and "allOf" not in ret):
            return dict(super().field2nullable(field, ret))
        if "$ref" in ret:
            ret["allOf"] = [{"$ref": ret.pop("$ref")}]
        return {"nullable": True}


class SchemaPlugin(MarshmallowPlugin):
    """apispec's marshmallow plugin as every schema of scenariokit is converted (OpenAPI and MCP)."""

    Converter = _Converter


def json_schema_of(cls: type) -> dict[str, Any]:
    """The JSON Schema (as MCP tools declare parameters) of input class ``cls``'s request schema.

    apispec converts the schema exactly as it does for the OpenAPI document; the OpenAPI 3.0 words
    are then said the JSON Schema way (``nullable``, a boolean ``exclusiveMinimum``) and nested
    schemas are written in place of their ``$ref``.
    """
    return output_schema_of(REQUESTS[cls])


def output_schema_of(schema: type[Schema] | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a response schema (an MCP tool's ``outputSchema``), said as
    :func:`json_schema_of` says a request's.

    ``schema`` is a marshmallow schema, or a mapping such as ``{"oneOf": [A, B]}`` whose schemas are
    converted in place.
    """
    plugin = SchemaPlugin()
    spec = APISpec("scenariokit", "1", OPENAPI_VERSION, plugins=[plugin])
    assert plugin.converter is not None  # set by APISpec when it takes the plugin
    converter = plugin.converter

    def convert(node: Any) -> Any:
        if isinstance(node, type) and issubclass(node, Schema):
            return converter.schema2jsonschema(node)
        if isinstance(node, Mapping):
            return {key: convert(value) for key, value in node.items()}
        if isinstance(node, list):
            return [convert(item) for item in node]
        return node

    root = convert(schema)
    components = spec.to_dict().get("components", {}).get("schemas", {})
    found: dict[str, Any] = _as_json_schema(root, components)
    return found


def _as_json_schema(node: Any, components: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_as_json_schema(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _as_json_schema(components[node["$ref"].rsplit("/", 1)[-1]], components)
    out = {key: _as_json_schema(value, components) for key, value in node.items()}
    if len(out.get("allOf", ())) == 1:  # a nested object with a description of its own: said in place
        (inner,) = out.pop("allOf")
        out = {**inner, **out}
    if out.pop("exclusiveMinimum", False) is True:
        out["exclusiveMinimum"] = out.pop("minimum")
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    return out
