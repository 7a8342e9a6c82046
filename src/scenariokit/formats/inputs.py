"""What callers may write: the input shapes of every create and update.

They hold only writable fields, and reuse the model's validators, so a rule is stated once and a bad
value is refused before anything is stored. The service layer turns them into domain objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import attrs

from scenariokit.domain.authoring import MAX_EXEC_CODE_CHARS
from scenariokit.domain.browser import BrowserSettings
from scenariokit.domain.code import valid_snippet_code, valid_step_code
from scenariokit.domain.errors import ValidationError
from scenariokit.domain.model import (
    DEFAULT_STEP_TIMEOUT_SECONDS,
    MAX_BACKOFF_SECONDS,
    MAX_RETRIES,
    MAX_TIMEOUT_SECONDS,
    NAME_MAX,
    FieldError,
    FieldErrors,
    Retries,
    camel,
    json_object,
    reports_every_field,
    required_text,
    valid_alias,
    valid_order,
    valid_timeout,
)
from scenariokit.domain.schedule import (
    CRON_FIELDS,
    MAX_INTERVAL_SECONDS,
    one_timing,
    valid_cron,
    valid_interval,
    valid_timezone,
)


def _about(description: str) -> dict[str, str]:
    """Field metadata: the description OpenAPI and the MCP tool parameters show for a field."""
    return {"description": description}


def _time_limit(description: str) -> Any:
    """An optional time limit in seconds, by the model's rule (greater than 0, at most the maximum)."""
    return attrs.field(default=None, validator=valid_timeout, metadata=_about(description))


_NAME = _about(f"A name of 1 to {NAME_MAX} characters.")
_DESCRIPTION = _about("Free text describing it.")
_BROWSER = (
    "How the run's browser context is made (docs/browser.md): `device` (a name of GET /api/v1/devices), "
    "`viewport {width, height}`, `locale`, `timezoneId`, `colorScheme` (light|dark), `geolocation "
    "{latitude, longitude, accuracy?}`, `permissions`, `extraHTTPHeaders`, `httpCredentials {credential: "
    "alias of a linked credential}`, `ignoreHTTPSErrors`, `userAgent`, `offline`, `video` "
    "(off|on|retain-on-failure), `blockUrls` (URL globs); every key optional."
)
_ENVIRONMENT_ID = _about("Id (UUID) of the environment whose `data` the steps read through `helpers`.")

EXEC_CODE_ABOUT = (
    "The step's code: Python with top-level `await`, using Playwright's async API. In scope: `page`, "
    "`context`, `browser`, `expect` (Playwright's assertions), `helpers` (`helpers.env` is the "
    "environment's data; `helpers.getEnvUrl(key=None)` returns data[key], else data['url'], else "
    "data['baseUrl']; `helpers.credentials[alias]` has `username` and `secret`), "
    "`await runSnippet(alias, args)` and `log(message)`; `print` also writes to the run log. "
    "A failed assertion or an exception fails the step. Example: "
    "`await page.goto(helpers.getEnvUrl())` then "
    "`await expect(page.get_by_text('Hello')).to_be_visible()` on the next line."
)


@reports_every_field
@attrs.frozen
class StepInput:
    """A step to create, or the full new state of one (PUT)."""

    exec_code: str = attrs.field(validator=valid_step_code, metadata=_about(EXEC_CODE_ABOUT))
    title: str | None = attrs.field(
        default=None, metadata=_about("A short label for the step, shown in run results.")
    )
    order: int | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(valid_order),
        metadata=_about("Position of the step, from 1; the steps from there on move down. Default: last."),
    )
    timeout_seconds: float | None = _time_limit(
        f"The step's time limit in seconds: greater than 0, at most {MAX_TIMEOUT_SECONDS} "
        f"(default {DEFAULT_STEP_TIMEOUT_SECONDS:g}). A step over its limit fails the run with error "
        "kind `timeout`."
    )
    id: uuid.UUID | None = None


@reports_every_field
@attrs.frozen
class LinkInput:
    """Link a credential to a scenario under an alias."""

    credential_id: uuid.UUID
    alias: str = attrs.field(validator=valid_alias)


@attrs.frozen
class StepOrderInput:
    """The new order of a scenario's steps: every step id, once."""

    step_ids: tuple[uuid.UUID, ...]


@reports_every_field
@attrs.frozen
class ScenarioInput:
    """A scenario to create, or the full new state of one (PUT)."""

    name: str = attrs.field(validator=required_text, metadata=_NAME)
    description: str | None = attrs.field(default=None, metadata=_DESCRIPTION)
    environment_id: uuid.UUID | None = attrs.field(default=None, metadata=_ENVIRONMENT_ID)
    timeout_seconds: float | None = _time_limit(
        f"The whole run's time limit in seconds: greater than 0, at most {MAX_TIMEOUT_SECONDS}. "
        "Without one a run may take the sum of its steps' limits."
    )
    steps: tuple[StepInput, ...] | None = attrs.field(
        default=None, metadata=_about("The scenario's steps, run in `order` (else in the order given).")
    )
    credentials: tuple[LinkInput, ...] | None = None
    retries: Retries = attrs.field(
        factory=Retries,
        metadata=_about(
            f"Try a failed run again: `count` more attempts (0 to {MAX_RETRIES}, default 0), each in a "
            "fresh browser, after a pause of `backoffSeconds` (0 to "
            f"{MAX_BACKOFF_SECONDS}) that stays `fixed`, grows `linear`ly or doubles (`exponential`). "
            "The run's status is its last attempt's; `flaky` tells a pass that needed a retry."
        ),
    )
    browser: BrowserSettings = attrs.field(
        factory=BrowserSettings,
        metadata=_about(_BROWSER + " Each key set here wins over the environment's."),
    )


@reports_every_field
@attrs.frozen
class EnvironmentInput:
    """An environment to create, or the full new state of one."""

    name: str = attrs.field(validator=required_text, metadata=_NAME)
    description: str | None = attrs.field(default=None, metadata=_DESCRIPTION)
    data: dict[str, Any] = attrs.field(
        factory=dict,
        validator=json_object,
        metadata=_about(
            "Any JSON object the steps read as `helpers.env`; put the site's base URL under `url` for "
            "`helpers.getEnvUrl()`. An update replaces the whole object."
        ),
    )
    browser: BrowserSettings = attrs.field(
        factory=BrowserSettings,
        metadata=_about(
            _BROWSER + " They apply to every run against the environment; a scenario's win key by key."
        ),
    )


@reports_every_field
@attrs.frozen(repr=False)
class CredentialInput:
    """A credential to create or replace. A ``secret`` of None keeps the stored one on update."""

    name: str = attrs.field(validator=required_text)
    description: str | None = None
    username: str | None = None
    secret: str | None = None

    def __repr__(self) -> str:
        return f"CredentialInput(name={self.name!r}, username={self.username!r}, secret=***)"


@reports_every_field
@attrs.frozen
class SnippetInput:
    """A snippet to create or replace."""

    alias: str = attrs.field(validator=valid_alias)
    title: str = attrs.field(validator=required_text)
    description: str | None = None
    code: str = attrs.field(default="", validator=valid_snippet_code)


@attrs.frozen
class RunInput:
    """A run to queue: which scenario, against which environment, and how.

    JSON may name the scenario as ``scenario`` instead (an id, or the ``{id, name}`` object a run
    answers): an alias the converter resolves (:mod:`scenariokit.formats.convert`).
    """

    scenario_id: uuid.UUID = attrs.field(metadata=_about("Id (UUID) of the scenario to run."))
    environment_id: uuid.UUID = attrs.field(metadata=_ENVIRONMENT_ID)
    save_session: bool = attrs.field(
        default=False,
        metadata=_about(
            "Keep the browser session (cookies, localStorage) as session `run-<runId>` when the run ends."
        ),
    )
    session_id: uuid.UUID | None = attrs.field(
        default=None, metadata=_about("Start from this saved session's cookies and storage.")
    )


#: attrs validators of the authoring inputs (the OpenAPI schemas carry them over as bounds)
def at_least_zero(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise FieldError(camel(attribute.name), "must be a whole number of at least 0")


def short_code(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if isinstance(value, str) and len(value) > MAX_EXEC_CODE_CHARS:
        raise FieldError(camel(attribute.name), f"must be at most {MAX_EXEC_CODE_CHARS} characters")


def optional_name(instance: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None:
        required_text(instance, attribute, value)


@reports_every_field
@attrs.frozen
class AuthoringStartInput:
    """A live authoring session to open (docs/authoring.md)."""

    environment_id: uuid.UUID = attrs.field(metadata=_ENVIRONMENT_ID)
    scenario_id: uuid.UUID | None = attrs.field(
        default=None,
        metadata=_about(
            "Id (UUID) of a scenario whose first `upToStep` steps are replayed before the page is handed "
            "over (all of them without `upToStep`); its credential links come along, and the session "
            "may save into it."
        ),
    )
    up_to_step: int | None = attrs.field(
        default=None,
        validator=at_least_zero,
        metadata=_about(
            "How many of the scenario's steps to replay, from the first: to heal a scenario that fails "
            "at step N, give N-1. Needs `scenarioId`."
        ),
    )
    session_id: uuid.UUID | None = attrs.field(
        default=None,
        metadata=_about("Id (UUID) of a saved session to start from (its cookies and storage)."),
    )
    credentials: tuple[LinkInput, ...] | None = attrs.field(
        default=None,
        metadata=_about(
            "More credentials the code may read as `helpers.credentials[alias]` "
            "(`[{credentialId, alias}]`); a scenario saved from the session links them too."
        ),
    )


@reports_every_field
@attrs.frozen
class AuthoringExecInput:
    """Step code to execute in a live authoring session's page."""

    code: str = attrs.field(
        validator=[short_code, valid_step_code],
        metadata=_about(
            "Step code, executed as a run executes a step (this is executed code, in the session's "
            "sandboxed worker). " + EXEC_CODE_ABOUT.split(". ", 1)[1]
        ),
    )
    screenshot: bool = attrs.field(
        default=False, metadata=_about("Also answer a PNG screenshot of the page after the code ran.")
    )
    title: str | None = attrs.field(
        default=None, metadata=_about("The title the step gets when this exec is saved.")
    )
    timeout_seconds: float | None = _time_limit(
        f"The code's time limit in seconds (default {DEFAULT_STEP_TIMEOUT_SECONDS:g}, at most "
        f"{MAX_TIMEOUT_SECONDS}); the step saved from it keeps it."
    )


@reports_every_field
@attrs.frozen
class AuthoringSaveInput:
    """Where a session's replayed steps and kept execs are saved."""

    name: str | None = attrs.field(
        default=None,
        validator=optional_name,
        metadata=_about(f"Save as a new scenario of this name (1 to {NAME_MAX} characters)."),
    )
    scenario_id: uuid.UUID | None = attrs.field(
        default=None,
        metadata=_about(
            "Id (UUID) of the scenario the session replayed (or one it saved) to save into: its steps "
            "after `upToStep` are replaced."
        ),
    )
    keep: tuple[int, ...] | None = attrs.field(
        default=None,
        metadata=_about(
            "The `index` of each exec to save (they must have passed); default: every exec that passed."
        ),
    )


#: The most environments one request may run a scenario against.
MAX_BATCH_ENVIRONMENTS = 20


def valid_environment_ids(_: Any, attribute: attrs.Attribute[Any], value: tuple[uuid.UUID, ...]) -> None:
    if not 1 <= len(value) <= MAX_BATCH_ENVIRONMENTS:
        raise FieldError("environmentIds", f"must name 1 to {MAX_BATCH_ENVIRONMENTS} environments")
    if len(set(value)) != len(value):
        raise FieldError("environmentIds", "must not name an environment twice")


@reports_every_field
@attrs.frozen
class RunBatchInput:
    """Runs to queue as one batch: one scenario against each of several environments.

    JSON names the scenario as :class:`RunInput` does (``scenarioId``, or the ``scenario`` alias).
    """

    scenario_id: uuid.UUID = attrs.field(metadata=_about("Id (UUID) of the scenario to run."))
    environment_ids: tuple[uuid.UUID, ...] = attrs.field(
        validator=valid_environment_ids,
        metadata=_about(
            f"Ids (UUIDs) of 1 to {MAX_BATCH_ENVIRONMENTS} environments, each once: one run per "
            "environment, queued together under one `batchId` (instead of `environmentId`)."
        ),
    )
    save_session: bool = attrs.field(
        default=False, metadata=_about("Keep each run's browser session, as for a single run.")
    )
    session_id: uuid.UUID | None = attrs.field(
        default=None, metadata=_about("Start every run from this saved session's cookies and storage.")
    )


@reports_every_field
@attrs.frozen
class ScheduleInput:
    """A schedule to create, or the full new state of one: ``cron`` or ``intervalSeconds``, not both."""

    scenario_id: uuid.UUID = attrs.field(metadata=_about("Id (UUID) of the scenario each fire runs."))
    environment_ids: tuple[uuid.UUID, ...] = attrs.field(
        validator=valid_environment_ids,
        metadata=_about(
            f"Ids (UUIDs) of 1 to {MAX_BATCH_ENVIRONMENTS} environments, each once: each fire queues one "
            "run per environment."
        ),
    )
    cron: str | None = attrs.field(
        default=None,
        validator=valid_cron,
        metadata=_about(f"A cron expression of 5 fields ({CRON_FIELDS}), read in `timezone`."),
    )
    interval_seconds: int | None = attrs.field(
        default=None,
        validator=valid_interval,
        metadata=_about(f"Fire every N seconds (1 to {MAX_INTERVAL_SECONDS}), instead of `cron`."),
    )
    timezone: str = attrs.field(
        default="UTC",
        validator=valid_timezone,
        metadata=_about("The IANA time zone `cron` is read in (default UTC), e.g. Europe/Berlin."),
    )
    enabled: bool = attrs.field(
        default=True, metadata=_about("false pauses the schedule: it does not fire until enabled again.")
    )

    def __attrs_post_init__(self) -> None:
        one_timing(self.cron, self.interval_seconds)


I = TypeVar("I")  # noqa: E741 - the input type a patch changes


@attrs.frozen(repr=False)
class Patch(Generic[I]):
    """A partial update (PATCH) of an ``I``: the fields given, each already checked by ``I``'s rules.

    The converter structures JSON into ``Patch[I]`` (fields not named are simply absent); the service
    lays it over the stored record's current input in the same unit of work that writes the result.
    """

    changes: Mapping[str, Any] = attrs.field(factory=dict)

    def __repr__(self) -> str:
        # Names only: a credential's patch may carry its secret.
        return f"Patch(fields={sorted(self.changes)!r})"

    def applied_to(self, current: Mapping[str, Any], kind: type[I]) -> I:
        """A ``kind`` of the ``current`` field values (by attribute name) with the given ones replaced.

        Checked as a whole once merged, never before: a stored value that today's rules refuse can
        be corrected by the very patch that replaces it. A broken rule is a ``ValidationError``
        naming the field, as from the converter (a patch built by hand is checked here too).
        """
        try:
            return kind(**{**current, **self.changes})
        except FieldErrors as exc:
            raise ValidationError("invalid update", exc.errors) from None
        except FieldError as exc:
            raise ValidationError("invalid update", {exc.field: exc.message}) from None
