"""The audit log (docs/deployment.md, "Audit log"): what each write records, and reading it back.

Every service that writes calls :func:`record` inside the unit of work of its write, before the
commit: the entry is stored with the write or not at all. The caller (door and token name) comes from
:func:`scenariokit.services.caller.current_caller`; summaries are made of names, ids and counts, never
of a secret or a field's value.
"""

from __future__ import annotations

import uuid

from scenariokit.domain.audit import AuditEntry
from scenariokit.formats.queries import AuditQuery, Page
from scenariokit.storage.ports import UnitOfWork

from .base import ServiceBase
from .caller import Door, current_caller

#: the longest summary stored; longer ones are cut (a name can be long)
MAX_SUMMARY = 500


async def record(
    uow: UnitOfWork,
    action: str,
    resource: str,
    resource_id: uuid.UUID | None,
    summary: str,
    *,
    door: Door | None = None,
) -> AuditEntry:
    """Add the entry of a write to ``uow`` (committed with the write); ``door`` overrides the caller's."""
    caller = current_caller()
    entry = AuditEntry(
        token_name=caller.token_name,
        door=door or caller.door,
        action=action,
        resource=resource,
        resource_id=resource_id,
        summary=summary if len(summary) <= MAX_SUMMARY else summary[: MAX_SUMMARY - 1] + "…",
    )
    await uow.audit.add(entry)
    return entry


class AuditService(ServiceBase):
    """Reading the audit log."""

    async def list(self, query: AuditQuery | None = None) -> Page[AuditEntry]:
        """One page of the audit log, newest first."""
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.audit.list(query or AuditQuery())
