"""``/api/v1/audit``: the audit log, every write through every door (docs/deployment.md, "Audit log")."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.queries import AuditQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, operation
from scenariokit_server.views import ok, query_params


@operation(
    "audit",
    "List the audit log",
    description="Newest first. Needs a token with scope `admin` when tokens are set. Each entry says when, "
    "with which token (`tokenName`, null without tokens or with a bare token), through which door "
    "(`rest`, `mcp`, `schedule`, `cli`, `library`), what was done (`action`) to which record "
    "(`resource`, `resourceId`), and a summary that never holds a secret.",
    response=schemas.AuditPage,
    params=list_params(AuditQuery),
)
async def list_audit(request: web.Request) -> web.Response:
    """One page of the audit log."""
    services = keys.services(request)
    page = await services.audit.list(AuditQuery.from_params(query_params(request)))
    return ok(shape.page_json(page, lambda entry: shape.audit_entry_json(services.converter, entry)))
