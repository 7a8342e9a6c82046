"""The JSON shapes responses carry, shared by REST, MCP and the CLI (docs/rest.md, "Conventions").

Policy on what a response may show lives here: a credential's secret never appears (``hasSecret``
instead), a session's token is masked and its storage state omitted.
"""

from __future__ import annotations

import base64
import functools
import mimetypes
import uuid
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import attrs
import cattrs

from scenariokit.domain.audit import AuditEntry
from scenariokit.domain.authoring import AuthoringStarted, ExecOutcome, PageLook, PageState
from scenariokit.domain.code import step_warnings
from scenariokit.domain.job import LogEvent
from scenariokit.domain.model import (
    Credential,
    Environment,
    Retries,
    Run,
    RunAttempt,
    RunLogEntry,
    RunStats,
    Scenario,
    Session,
    Snippet,
    Step,
    StepStatus,
    camel,
)
from scenariokit.domain.revisions import Revision, RevisionDiff, RevisionInfo, fields_document
from scenariokit.domain.schedule import Schedule
from scenariokit.formats.convert import format_time, parse_time
from scenariokit.formats.queries import Page
from scenariokit.formats.records import ScenarioRecord

T = TypeVar("T")
JSON = dict[str, Any]
#: Where REST serves a run's files (``{API}/run/{id}/artifacts/{name}``).
API_PATH = "/api/v1"
#: Content types of the files a run records; anything else is guessed from its name.
ARTIFACT_TYPES = {".png": "image/png", ".zip": "application/zip", ".webm": "video/webm"}


def artifact_content_type(name: str) -> str:
    """The content type of a file a run recorded, by its name."""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    return ARTIFACT_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def artifact_url(run_id: uuid.UUID, name: str) -> str:
    """The REST path of a file run ``run_id`` recorded."""
    return f"{API_PATH}/run/{run_id}/artifacts/{quote(name, safe='')}"


def trace_artifact(run: Run) -> str | None:
    """The name of the Playwright trace ``run`` recorded, if any."""
    return next((name for name in run.artifacts if name.endswith(".zip")), None)


def image_artifacts(run: Run) -> list[str]:
    """The run's image files: the failed step's screenshot (``step-N.png``) first, then newest first."""
    images = [name for name in reversed(run.artifacts) if artifact_content_type(name).startswith("image/")]
    failed = next((result for result in run.step_results if result.status is StepStatus.FAIL), None)
    preferred = f"step-{failed.order}.png" if failed is not None else None
    if preferred in images:
        images.remove(preferred)
        images.insert(0, preferred)
    return images


def artifacts_json(run: Run) -> list[JSON]:
    """The files a run recorded: ``[{name, url, contentType}]``, in the order they were recorded."""
    return [
        {"name": name, "url": artifact_url(run.id, name), "contentType": artifact_content_type(name)}
        for name in run.artifacts
    ]


@attrs.frozen
class RunDetail:
    """A run with what its detail view shows eagerly: environment, session and a page of its log."""

    run: Run
    environment: Environment | None
    session: Session | None
    logs: Page[RunLogEntry] | None = None


def scenario_json(conv: cattrs.Converter, scenario: Scenario) -> JSON:
    """A scenario with its ordered steps and credential links."""
    return conv.unstructure(scenario)


def saved_scenario_json(conv: cattrs.Converter, scenario: Scenario) -> JSON:
    """A scenario as a write answers it: :func:`scenario_json` plus the ``warnings`` of its step code."""
    warnings = step_warnings(scenario.steps, scenario_id=scenario.id)
    return {**scenario_json(conv, scenario), "warnings": [warning.to_json() for warning in warnings]}


def saved_step_json(conv: cattrs.Converter, step: Step, scenario_id: uuid.UUID) -> JSON:
    """A step as a write answers it: :func:`step_json` plus the ``warnings`` of its code."""
    warnings = step_warnings([step], scenario_id=scenario_id)
    return {**step_json(conv, step), "warnings": [warning.to_json() for warning in warnings]}


def scenario_record_json(conv: cattrs.Converter, record: ScenarioRecord) -> JSON:
    """A scenario read as a record (:mod:`scenariokit.formats.records`): the JSON of :func:`scenario_json`.

    Built by hand for speed, key for key and value for value what the converter writes for the same
    stored scenario; ``tests/storage/test_scenario_records.py`` holds the two together.
    """
    return {
        "name": record.name,
        "description": record.description,
        "environmentId": record.environment_id,
        "timeoutSeconds": record.timeout_seconds,
        "credentials": [{"credentialId": ident, "alias": alias} for ident, alias in record.credentials],
        "steps": [
            {"execCode": code, "order": order, "title": title, "timeoutSeconds": seconds, "id": ident}
            for code, order, title, seconds, ident in record.steps
        ],
        "id": record.id,
        "createdAt": _record_time(record.created_at),
        "updatedAt": _record_time(record.updated_at),
        "retries": dict(_retries_json(conv, record.retries)),
        "browser": {} if record.browser.is_empty else conv.unstructure(record.browser),
        "revision": record.revision,
    }


def _record_time(text: str) -> str:
    """A record's time (``...SS.ffffffZ``) as the converter writes times: to the millisecond, cut."""
    if len(text) == 27:
        return text[:23] + "Z"
    return format_time(parse_time(text))


@functools.lru_cache(maxsize=64)
def _retries_json(conv: cattrs.Converter, retries: Retries) -> JSON:
    # a handful of distinct values across every scenario: each is unstructured once (callers copy it)
    result: JSON = conv.unstructure(retries)
    return result


def step_json(conv: cattrs.Converter, step: Step) -> JSON:
    """One step."""
    return conv.unstructure(step)


def environment_json(conv: cattrs.Converter, environment: Environment) -> JSON:
    """One environment."""
    return conv.unstructure(environment)


def credential_json(conv: cattrs.Converter, credential: Credential) -> JSON:
    """A credential without its secret, saying only whether one is stored."""
    data = conv.unstructure(credential)
    data.pop("secret", None)
    data["hasSecret"] = credential.has_secret
    return data


def snippet_json(conv: cattrs.Converter, snippet: Snippet) -> JSON:
    """One snippet."""
    return conv.unstructure(snippet)


def session_json(conv: cattrs.Converter, session: Session) -> JSON:
    """A session with its token masked and its cookies and localStorage left out."""
    data = conv.unstructure(session)
    data.pop("storageState", None)
    data["token"] = session.masked_token
    return data


def log_json(conv: cattrs.Converter, entry: RunLogEntry) -> JSON:
    """One log line."""
    data = conv.unstructure(entry)
    data.pop("runId", None)
    return data


def run_json(
    conv: cattrs.Converter,
    run: Run,
    environment: Environment | None = None,
    session: Session | None = None,
    *,
    shaped: dict[uuid.UUID, JSON] | None = None,
) -> JSON:
    """A run, with its scenario reference and, when given, the eager environment and session.

    ``shaped`` holds the environments and sessions already shaped for other runs of the same page, by
    id: a page of runs against one environment shapes it once (they are the same JSON).
    """
    data = conv.unstructure(run)
    data.pop("scenarioName", None)
    data.pop("sourceSessionId", None)
    data.pop("timings", None)  # the detail's: lists stay lean
    data["scenario"] = {"id": str(run.scenario_id), "name": run.scenario_name}
    data["artifacts"] = artifacts_json(run)
    data["durationMs"] = run.duration_ms
    data["attempts"] = _attempts_json(conv, run, data)
    data["environment"] = _shaped(shaped, environment, lambda env: environment_json(conv, env))
    data["session"] = _shaped(shaped, session, lambda found: session_json(conv, found))
    if run.source_session_id is not None:
        data["fromSessionId"] = str(run.source_session_id)
    return data


def _attempts_json(conv: cattrs.Converter, run: Run, data: JSON) -> list[JSON]:
    """``run.all_attempts`` as JSON; a finished run of one attempt is that attempt, made of the run's own
    fields as ``data`` already holds them (its step results are not unstructured a second time)."""
    if run.attempts or not run.finished:
        attempts: list[JSON] = conv.unstructure(run.all_attempts)
        return attempts
    return [{"attempt": 1, **{key: data[key] for key in _RUN_FIELDS_OF_AN_ATTEMPT}}]


#: The JSON keys of :class:`RunAttempt` after its number, in its order: the run's own fields of the same name.
_RUN_FIELDS_OF_AN_ATTEMPT = tuple(camel(field.name) for field in attrs.fields(RunAttempt)[1:])


def _shaped(
    shaped: dict[uuid.UUID, JSON] | None, record: Environment | Session | None, shape: Callable[[Any], JSON]
) -> JSON | None:
    if record is None:
        return None
    if shaped is None:
        return shape(record)
    found = shaped.get(record.id)
    if found is None:
        found = shaped[record.id] = shape(record)
    return found


def run_item_json(conv: cattrs.Converter, detail: RunDetail) -> JSON:
    """A run as a list shows it: with its environment and session, without the detail's timings and log."""
    return run_json(conv, detail.run, detail.environment, detail.session)


def runs_page_json(conv: cattrs.Converter, page: Page[RunDetail]) -> JSON:
    """A page of runs as lists show them (:func:`run_item_json`), each environment and session shaped
    once for the page."""
    shaped: dict[uuid.UUID, JSON] = {}
    return page_json(
        page, lambda detail: run_json(conv, detail.run, detail.environment, detail.session, shaped=shaped)
    )


def run_detail_json(
    conv: cattrs.Converter, detail: RunDetail, *, trace_viewer_url: str | None = None
) -> JSON:
    """The run detail view: the run, its environment and session, and a page of its log.

    ``traceViewerUrl`` is where the server's trace viewer opens the run's trace (the server signs it
    when tokens are set), null when the run recorded none or no viewer is served.
    """
    data = run_json(conv, detail.run, detail.environment, detail.session)
    data["traceViewerUrl"] = trace_viewer_url
    data["timings"] = conv.unstructure(detail.run.timings) if detail.run.timings else None
    if detail.logs is not None:
        data["logs"] = page_json(detail.logs, lambda entry: log_json(conv, entry))
    return data


def schedule_json(conv: cattrs.Converter, schedule: Schedule) -> JSON:
    """One schedule, with its last and next fire."""
    return conv.unstructure(schedule)


def audit_entry_json(conv: cattrs.Converter, entry: AuditEntry) -> JSON:
    """One entry of the audit log."""
    return conv.unstructure(entry)


def stats_json(conv: cattrs.Converter, stats: RunStats) -> JSON:
    """A scenario's run history figures: counts, rates, duration percentiles and its last failure."""
    last = stats.last_failure
    return {
        "runs": stats.runs,
        "passed": stats.passed,
        "failed": stats.failed,
        "flaky": stats.flaky,
        "passRate": stats.pass_rate,
        "flakyRate": stats.flaky_rate,
        "durationMs": {"p50": stats.p50_ms, "p95": stats.p95_ms},
        "lastFailure": conv.unstructure(last) if last is not None else None,
        "lastPass": conv.unstructure(stats.last_pass) if stats.last_pass is not None else None,
        "changedSinceLastPass": stats.changed_since_last_pass,
    }


# --- revisions (docs/revisions.md) ----------------------------------------------------------------


def revision_info_json(conv: cattrs.Converter, info: RevisionInfo) -> JSON:
    """A revision as a list shows it: ``{number, createdAt, source, tokenName, message, contentHash}``."""
    return {
        "number": info.number,
        "createdAt": conv.unstructure(info.created_at),
        "source": info.source.value,
        "tokenName": info.token_name,
        "message": info.message,
        "contentHash": info.content_hash,
    }


def revision_json(conv: cattrs.Converter, revision: Revision) -> JSON:
    """One revision with the whole scenario it held: fields, steps in order, credential links."""
    content = revision.content
    return {
        **revision_info_json(conv, revision.info),
        "scenario": {
            "id": str(revision.info.scenario_id),
            **fields_document(content),
            "steps": [step_json(conv, step) for step in content.steps],
        },
    }


def revision_diff_json(conv: cattrs.Converter, diff: RevisionDiff) -> JSON:
    """``{from, to, fields: {name: [old, new]}, steps: [{order, change, diff, ...}]}``."""
    return {
        "from": diff.from_number,
        "to": diff.to_number,
        "fields": {name: [old, new] for name, (old, new) in diff.fields.items()},
        "steps": [
            {
                "order": change.order,
                "change": change.change.value,
                "diff": change.diff,
                "stepId": str(change.step_id),
                "title": change.title,
                "fromOrder": change.from_order,
                "toOrder": change.to_order,
                "moved": change.moved,
            }
            for change in diff.steps
        ],
    }


def batch_json(conv: cattrs.Converter, batch_id: object, runs: tuple[RunDetail, ...]) -> JSON:
    """The runs one request queued together: ``batchId`` and each run as a list shows it."""
    return {"batchId": str(batch_id), "runs": [run_item_json(conv, detail) for detail in runs]}


def page_json(page: Page[T], item: Callable[[T], JSON]) -> JSON:
    """The paged list envelope: ``items``, ``total``, ``page``, ``limit``."""
    return {
        "items": [item(x) for x in page.items],
        "total": page.total,
        "page": page.page,
        "limit": page.limit,
    }


# --- agent authoring (docs/authoring.md) ----------------------------------------------------------


def _authoring_page(conv: cattrs.Converter, page: PageState | None, *, screenshot: bool) -> JSON:
    """URL, title and snapshot (null when the page is gone); ``screenshot`` adds the PNG as base64."""
    data: JSON = {
        "url": page.url if page else None,
        "title": page.title if page else None,
        "snapshot": page.snapshot if page else None,
    }
    if screenshot:
        shot = page.screenshot if page else None
        data["screenshot"] = base64.b64encode(shot).decode() if shot else None
    return data


def authoring_log_json(conv: cattrs.Converter, line: LogEvent) -> JSON:
    """One log line of a session: ``{at, level, message}``."""
    return {"at": conv.unstructure(line.at), "level": line.level, "message": line.message}


def authoring_started_json(conv: cattrs.Converter, started: AuthoringStarted) -> JSON:
    """A started session: its id, the page, the replayed steps' results and their log."""
    return {
        "authoringId": str(started.authoring_id),
        **_authoring_page(conv, started.page, screenshot=False),
        "replayed": [conv.unstructure(result) for result in started.replayed],
        "logs": [authoring_log_json(conv, line) for line in started.logs],
    }


def authoring_exec_json(conv: cattrs.Converter, outcome: ExecOutcome, *, screenshot: bool = False) -> JSON:
    """An exec's answer: ``index``, ``ok``, ``error`` (kind, message), ``logs``, the page, ``live``."""
    error = outcome.error
    return {
        "index": outcome.index,
        "ok": outcome.ok,
        "error": {"kind": error.kind.value, "message": error.message} if error else None,
        "logs": [authoring_log_json(conv, line) for line in outcome.logs],
        **_authoring_page(conv, outcome.page, screenshot=screenshot),
        "live": outcome.live,
    }


def authoring_look_json(conv: cattrs.Converter, look: PageLook, *, screenshot: bool = False) -> JSON:
    """A session's page now, with the log lines since the last answer."""
    return {
        "authoringId": str(look.authoring_id),
        **_authoring_page(conv, look.page, screenshot=screenshot),
        "logs": [authoring_log_json(conv, line) for line in look.logs],
    }
