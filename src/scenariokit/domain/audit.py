"""The audit log: one entry per write, through whichever door it came (docs/deployment.md, "Audit log").

An entry says when, who (the token's name), through which door, what was done to which record, and a
one-line summary made of names and counts, never of a secret value.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import datetime

import attrs

from scenariokit.domain.model import utcnow

#: What a write did to its record.
ACTIONS = ("create", "update", "delete", "import", "run", "cancel", "fire", "link", "unlink", "save")

_made = threading.Lock()
_last = (0, 0)  # the millisecond and counter of the latest id made in this process


def entry_id() -> uuid.UUID:
    """A new entry's id: a UUID version 7 (RFC 9562), whose order is the order ids were made in.

    ``at`` keeps milliseconds, so writes within one millisecond share it; the log is ordered by (at,
    id), and an id that counts within its millisecond (its 12 bits after the time, RFC 9562's
    "dedicated counter") shows them in the order they were made, where a random id shuffled them. The
    last 62 bits are random: ids made in other processes at the same moment differ there.
    """
    global _last
    with _made:
        now = time.time_ns() // 1_000_000
        last_ms, counter = _last
        if now > last_ms:
            counter = 0
        elif counter < 0xFFF:
            now, counter = last_ms, counter + 1
        else:  # 4,096 in one millisecond: borrow the next one
            now, counter = last_ms + 1, 0
        _last = (now, counter)
    tail = int.from_bytes(os.urandom(8)) & ((1 << 62) - 1)
    return uuid.UUID(int=(now & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | tail)


@attrs.frozen(kw_only=True)
class AuditEntry:
    """One recorded write."""

    id: uuid.UUID = attrs.field(factory=entry_id)
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
