"""Scenario revisions (docs/revisions.md): what a scenario held after each change, and what changed.

A revision is immutable: its number, when and through which door it was made, an optional message,
and the whole content of the scenario (fields, steps, credential links). Its content hash says
whether a write changed anything: a write whose content hashes the same makes no revision. Diffs are
worked out here, from two contents, with :mod:`difflib`: per step, matched by step id, so a step
that moved reads as moved and an edited one as its unified diff.
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs

from scenariokit.domain.browser import BrowserSettings
from scenariokit.domain.fields import camel
from scenariokit.domain.model import CredentialLink, FieldError, Retries, Scenario, Step, utcnow

#: The longest message a revision keeps.
MESSAGE_MAX = 1000


class RevisionSource(enum.StrEnum):
    """The door a change came through: REST, MCP, a YAML import, an authoring save, the library, a restore."""

    REST = "rest"
    MCP = "mcp"
    IMPORT = "import"
    AUTHORING = "authoring"
    LIBRARY = "library"
    RESTORE = "restore"


def valid_message(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    """A revision's message: text of at most :data:`MESSAGE_MAX` characters, or None."""
    if value is None:
        return
    if not isinstance(value, str):
        raise FieldError("message", "must be text")
    if len(value) > MESSAGE_MAX:
        raise FieldError("message", f"must be at most {MESSAGE_MAX} characters")
    if "\x00" in value:
        raise FieldError("message", "must not hold a NUL character")


def _blank_is_none(value: str | None) -> str | None:
    return None if isinstance(value, str) and not value.strip() else value


@attrs.frozen
class Origin:
    """Who made a change and why: the door (``source``), the API token's name, a message.

    Every write of a scenario takes one; the library's default is ``library`` with no token and no
    message. The services fill ``token_name`` from the caller of the call (``services.caller``).
    """

    source: RevisionSource = RevisionSource.LIBRARY
    token_name: str | None = None
    message: str | None = attrs.field(default=None, converter=_blank_is_none, validator=valid_message)

    def through(self, source: RevisionSource) -> Origin:
        """The same author and message through another door (an import, an authoring save, a restore)."""
        return attrs.evolve(self, source=source)


@attrs.frozen
class ScenarioContent:
    """What a revision keeps of a scenario: everything but its id, its times and its revision number."""

    name: str
    description: str | None = None
    environment_id: uuid.UUID | None = None
    timeout_seconds: float | None = None
    retries: Retries = attrs.field(factory=Retries)
    credentials: tuple[CredentialLink, ...] = ()
    steps: tuple[Step, ...] = ()
    browser: BrowserSettings = attrs.field(factory=BrowserSettings)


#: What a revision keeps of a scenario: these fields of :class:`Scenario`, under the same names.
CONTENT_FIELDS = tuple(field.name for field in attrs.fields(ScenarioContent))


def content_of(scenario: Scenario) -> ScenarioContent:
    """The content of a scenario as a revision keeps it."""
    return ScenarioContent(**{name: getattr(scenario, name) for name in CONTENT_FIELDS})


def _canonical(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def step_document(step: Step) -> dict[str, Any]:
    """A step's body as a revision stores and hashes it: its order is its place in the revision."""
    return {
        "id": str(step.id),
        "title": step.title,
        "execCode": step.exec_code,
        "timeoutSeconds": step.timeout_seconds,
    }


def step_hash(step: Step) -> str:
    """The hash of a step's body (SHA-256, hex): equal bodies are stored once."""
    return hashlib.sha256(_canonical(step_document(step))).hexdigest()


def _json_value(value: Any) -> Any:
    """An attrs value as the JSON the storage converter writes: camelCase keys, unset (None) keys left out."""
    if attrs.has(type(value)):
        return {
            camel(field.name): _json_value(item)
            for field in attrs.fields(type(value))
            if (item := getattr(value, field.name)) is not None
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value


def fields_document(content: ScenarioContent) -> dict[str, Any]:
    """The fields of a content other than its steps, as JSON values.

    Browser settings appear only when some are set, so a scenario without any keeps the hash its
    revisions had before scenarios had browser settings.
    """
    retries = content.retries
    browser = {} if content.browser.is_empty else {"browser": _json_value(content.browser)}
    return {
        "name": content.name,
        "description": content.description,
        "environmentId": None if content.environment_id is None else str(content.environment_id),
        "timeoutSeconds": content.timeout_seconds,
        "retries": {
            "count": retries.count,
            "backoff": retries.backoff.value,
            "backoffSeconds": retries.backoff_seconds,
        },
        "credentials": [
            {"credentialId": str(link.credential_id), "alias": link.alias} for link in content.credentials
        ],
        **browser,
    }


def fields_hash(content: ScenarioContent) -> str:
    """The hash of a content's fields alone (SHA-256, hex): equal fields are stored once."""
    return hashlib.sha256(_canonical(fields_document(content))).hexdigest()


def content_hash(content: ScenarioContent) -> str:
    """The hash of a whole content (SHA-256, hex): the fields, then each step's hash in order."""
    document = {"fields": fields_document(content), "steps": [step_hash(step) for step in content.steps]}
    return hashlib.sha256(_canonical(document)).hexdigest()


@attrs.frozen
class RevisionInfo:
    """A revision without its content: what a list of revisions shows."""

    scenario_id: uuid.UUID
    number: int
    content_hash: str
    source: RevisionSource = RevisionSource.LIBRARY
    token_name: str | None = None
    message: str | None = None
    created_at: datetime = attrs.field(factory=utcnow)


@attrs.frozen
class Revision:
    """One immutable revision of a scenario: its number, who made it and the whole content."""

    info: RevisionInfo
    content: ScenarioContent

    @property
    def number(self) -> int:
        """The revision's number: 1 for the scenario as created, one more for each change."""
        return self.info.number

    def as_scenario(self, base: Scenario) -> Scenario:
        """The scenario ``base`` (its id, times) as this revision holds it."""
        content = {name: getattr(self.content, name) for name in CONTENT_FIELDS}
        return attrs.evolve(base, **content, revision=self.number)


def new_revision(scenario: Scenario, origin: Origin, *, at: datetime | None = None) -> Revision:
    """The revision ``scenario`` is at (its ``revision`` number), made through ``origin``."""
    content = content_of(scenario)
    info = RevisionInfo(
        scenario_id=scenario.id,
        number=scenario.revision,
        content_hash=content_hash(content),
        source=origin.source,
        token_name=origin.token_name,
        message=origin.message,
        created_at=at or utcnow(),
    )
    return Revision(info=info, content=content)


# --- diffs ----------------------------------------------------------------------------------------


class StepChangeKind(enum.StrEnum):
    """How a step differs between two revisions."""

    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@attrs.frozen
class StepChange:
    """One step that differs: its order (in the newer revision; the older one's when removed), the
    kind of change, and a unified diff of its fields and code a person reads."""

    step_id: uuid.UUID
    order: int
    change: StepChangeKind
    diff: str
    title: str | None = None
    #: its order in the older revision (None when added)
    from_order: int | None = None
    #: its order in the newer revision (None when removed)
    to_order: int | None = None
    #: its place among the other steps changed (a reorder), not only its number
    moved: bool = False


#: The fields a diff compares, in the order it lists them (the JSON names).
DIFF_FIELDS = ("name", "description", "environmentId", "timeoutSeconds", "retries", "credentials", "browser")


@attrs.frozen
class RevisionDiff:
    """What changed from revision ``from_number`` to ``to_number`` of one scenario."""

    scenario_id: uuid.UUID
    from_number: int
    to_number: int
    #: per field that differs, its JSON name and (old, new) JSON values
    fields: dict[str, tuple[Any, Any]]
    steps: tuple[StepChange, ...]

    @property
    def unchanged(self) -> bool:
        """Whether the two revisions hold the same content."""
        return not self.fields and not self.steps


def _longest_common(a: Sequence[uuid.UUID], b: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """The ids of a longest common subsequence of ``a`` and ``b``: the steps that kept their place."""
    matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    kept: set[uuid.UUID] = set()
    for block in matcher.get_matching_blocks():
        kept.update(a[block.a : block.a + block.size])
    return kept


def _step_lines(step: Step, *, order: int | None) -> list[str]:
    lines = []
    if order is not None:
        lines.append(f"order: {order}\n")
    lines.append(f"title: {json.dumps(step.title, ensure_ascii=False)}\n")
    lines.append(f"timeoutSeconds: {json.dumps(step.timeout_seconds)}\n")
    lines.append("execCode:\n")
    code = step.exec_code if step.exec_code.endswith("\n") or not step.exec_code else step.exec_code + "\n"
    lines.extend(f"  {line}" for line in code.splitlines(keepends=True))
    return lines


def _unified(
    old: Step | None, new: Step | None, *, old_label: str, new_label: str, orders: tuple[int, int] | None
) -> str:
    before = _step_lines(old, order=orders[0] if orders else None) if old is not None else []
    after = _step_lines(new, order=orders[1] if orders else None) if new is not None else []
    return "".join(difflib.unified_diff(before, after, fromfile=old_label, tofile=new_label, n=3))


def diff_contents(scenario_id: uuid.UUID, older: Revision, newer: Revision) -> RevisionDiff:
    """What changed from ``older`` to ``newer``: fields that differ, and each step added, removed or changed.

    Steps are matched by id. A step whose place among the others changed (not only its number, as
    when a step before it was added) is ``changed`` with its ``order`` line in the diff; one that
    only shifted and kept its body is not listed.
    """
    old_fields, new_fields = fields_document(older.content), fields_document(newer.content)
    fields = {
        name: (old_fields.get(name), new_fields.get(name))
        for name in DIFF_FIELDS
        if old_fields.get(name) != new_fields.get(name)
    }
    old_steps = {step.id: step for step in older.content.steps}
    new_steps = {step.id: step for step in newer.content.steps}
    common_old = [step.id for step in older.content.steps if step.id in new_steps]
    common_new = [step.id for step in newer.content.steps if step.id in old_steps]
    stayed = _longest_common(common_old, common_new)
    a, b = older.number, newer.number
    changes: list[StepChange] = []
    for step in newer.content.steps:
        before = old_steps.get(step.id)
        label = f"revision {b} step {step.order}"
        if before is None:
            diff = _unified(None, step, old_label="/dev/null", new_label=label, orders=None)
            changes.append(
                StepChange(step.id, step.order, StepChangeKind.ADDED, diff, step.title, None, step.order)
            )
            continue
        moved = step.id not in stayed
        if not moved and step_document(before) == step_document(step):
            continue
        diff = _unified(
            before,
            step,
            old_label=f"revision {a} step {before.order}",
            new_label=label,
            orders=(before.order, step.order) if moved else None,
        )
        changes.append(
            StepChange(
                step.id, step.order, StepChangeKind.CHANGED, diff, step.title, before.order, step.order, moved
            )
        )
    for step in older.content.steps:
        if step.id in new_steps:
            continue
        diff = _unified(
            step, None, old_label=f"revision {a} step {step.order}", new_label="/dev/null", orders=None
        )
        changes.append(
            StepChange(step.id, step.order, StepChangeKind.REMOVED, diff, step.title, step.order, None)
        )
    changes.sort(key=lambda change: (change.order, change.change is StepChangeKind.REMOVED))
    return RevisionDiff(
        scenario_id=scenario_id, from_number=a, to_number=b, fields=fields, steps=tuple(changes)
    )
