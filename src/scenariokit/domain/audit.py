"""The audit log: one entry per write, through whichever door it came (docs/deployment.md, "Audit log").

An entry says when, who (the token's name), through which door, what was done to which record, and a
one-line summary made of names and counts, never of a secret value.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import attrs

from scenariokit.domain.model import utcnow

#: What a write did to its record.
ACTIONS = ("create", "update", "delete", "import", "run", "cancel", "fire", "link", "unlink", "save")


@attrs.frozen(kw_only=True)
class AuditEntry:
    """One recorded write."""

    id: uuid.UUID = attrs.field(factory=uuid.uuid4)
    at: datetime = attrs.field(factory=utcnow)
    #: the name of the token the write came with; None without tokens or with a bare token
    token_name: str | None = None
    #: ``rest``, ``mcp``, ``schedule``, ``cli`` or ``library``
    door: str = "library"
    action: str = attrs.field(validator=attrs.validators.in_(ACTIONS))
    #: the kind of record written: ``scenario``, ``step``, ``environment``, ``credential`` …
    resource: str
    resource_id: uuid.UUID | None = None
    summary: str = ""
