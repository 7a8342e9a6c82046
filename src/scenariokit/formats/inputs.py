"""What callers may write: the input shapes of every create and update.

They hold only writable fields, and reuse the model's validators, so a rule is stated once and a bad
value is refused before anything is stored. The service layer turns them into domain objects.
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from scenariokit.domain.code import valid_snippet_code, valid_step_code
from scenariokit.domain.model import (
    json_object,
    reports_every_field,
    required_text,
    valid_alias,
    valid_order,
    valid_timeout,
)


@reports_every_field
@attrs.frozen
class StepInput:
    """A step to create, or the full new state of one (PUT)."""

    exec_code: str = attrs.field(validator=valid_step_code)
    title: str | None = None
    order: int | None = attrs.field(default=None, validator=attrs.validators.optional(valid_order))
    timeout_seconds: float | None = attrs.field(default=None, validator=valid_timeout)
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

    name: str = attrs.field(validator=required_text)
    description: str | None = None
    environment_id: uuid.UUID | None = None
    timeout_seconds: float | None = attrs.field(default=None, validator=valid_timeout)
    steps: tuple[StepInput, ...] | None = None
    credentials: tuple[LinkInput, ...] | None = None


@reports_every_field
@attrs.frozen
class EnvironmentInput:
    """An environment to create, or the full new state of one."""

    name: str = attrs.field(validator=required_text)
    description: str | None = None
    data: dict[str, Any] = attrs.field(factory=dict, validator=json_object)


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
    """A run to queue: which scenario, against which environment, and how."""

    scenario_id: uuid.UUID
    environment_id: uuid.UUID | None = None
    save_session: bool = False
    session_id: uuid.UUID | None = None
