"""Who may call what: the scope of every route and MCP tool, in one table, and the middleware holding it.

With ``SCENARIOKIT_API_TOKENS`` set, a request needs a token whose scope holds the one its route (or,
over ``/mcp``, its tool) names here: ``read`` < ``run`` < ``write`` < ``admin`` (docs/deployment.md,
"Tokens and scopes"). Without tokens everything is open, as before. A route missing from the table is
refused to every token but ``admin`` (and a test walks the route table so that none is missing).

The middleware also says who is calling (:mod:`scenariokit.services.caller`): the door (``rest``,
``mcp``) and the token's name, which the services record with each write (the audit log).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from scenariokit.domain.access import ApiToken, Scope
from scenariokit.services.caller import Caller, Door, calling_as
from scenariokit_server import keys
from scenariokit_server.errors import problem
from scenariokit_server.reports import ASSETS, INDEX_URL, REPORT_PREFIX, is_report_page, token_page
from scenariokit_server.settings import Settings
from scenariokit_server.trace import TRACE_PREFIX, ArtifactLinks
from scenariokit_server.views import API_PREFIX

log = logging.getLogger(__name__)

REALM = "scenariokit"
#: Paths where a request without a valid token is refused (401) whatever its route, an unknown one
#: included: a caller without a token learns nothing of what is there.
PROTECTED_PREFIXES = (API_PREFIX, "/mcp", "/metrics")

READ, RUN, WRITE, ADMIN = Scope.READ, Scope.RUN, Scope.WRITE, Scope.ADMIN
#: The doors a request comes through.
DOORS: tuple[Door, ...] = ("rest", "mcp")
#: No token needed: the service's health, its documentation and the trace viewer's own files.
OPEN = None

_A = API_PREFIX
_SCENARIO = f"{_A}/scenarios/{{id}}"
_STEP = f"{_SCENARIO}/steps/{{stepId}}"

#: The scope each route needs, by method and path template (``read``: every GET but the audit log;
#: ``run``: queue and cancel runs, authoring sessions; ``write``: create, change, delete, import;
#: ``admin``: credentials, sessions, schedules and the audit log). A YAML export that asks for
#: secrets (``includeSecrets=true``) needs ``admin`` whatever its route says (see :func:`needed_scope`).
ROUTE_SCOPES: Mapping[tuple[str, str], Scope | None] = {
    ("GET", "/health"): OPEN,
    ("GET", "/metrics"): READ,
    ("GET", "/docs"): OPEN,
    ("GET", "/docs/openapi.json"): OPEN,
    ("GET", "/docs/static"): OPEN,
    ("GET", TRACE_PREFIX): OPEN,
    ("GET", f"{TRACE_PREFIX}/{{name}}"): OPEN,
    ("GET", REPORT_PREFIX): READ,
    ("GET", INDEX_URL): READ,
    ("GET", f"{REPORT_PREFIX}/runs/{{id}}"): READ,
    ("GET", f"{ASSETS}/{{name}}"): OPEN,
    ("POST", "/mcp"): READ,  # and then each tool's own scope (TOOL_SCOPES)
    ("POST", "/mcp/"): READ,
    ("GET", f"{_A}/scenarios"): READ,
    ("POST", f"{_A}/scenarios"): WRITE,
    ("GET", f"{_A}/scenarios/export"): READ,
    ("POST", f"{_A}/scenarios/import"): WRITE,
    ("GET", _SCENARIO): READ,
    ("PATCH", _SCENARIO): WRITE,
    ("PUT", _SCENARIO): WRITE,
    ("DELETE", _SCENARIO): WRITE,
    ("GET", f"{_SCENARIO}/export"): READ,
    ("GET", f"{_SCENARIO}/runs"): READ,
    ("GET", f"{_SCENARIO}/stats"): READ,
    ("GET", f"{_SCENARIO}/revisions"): READ,
    ("GET", f"{_SCENARIO}/revisions/{{number}}"): READ,
    ("GET", f"{_SCENARIO}/revisions/{{from}}/diff/{{to}}"): READ,
    ("POST", f"{_SCENARIO}/revisions/{{number}}/restore"): WRITE,
    ("GET", f"{_SCENARIO}/steps"): READ,
    ("POST", f"{_SCENARIO}/steps"): WRITE,
    ("PUT", f"{_SCENARIO}/steps/order"): WRITE,
    ("GET", _STEP): READ,
    ("PATCH", _STEP): WRITE,
    ("PUT", _STEP): WRITE,
    ("DELETE", _STEP): WRITE,
    ("GET", f"{_SCENARIO}/credentials"): READ,
    ("POST", f"{_SCENARIO}/credentials"): WRITE,
    ("GET", f"{_SCENARIO}/credentials/{{credentialId}}"): READ,
    ("DELETE", f"{_SCENARIO}/credentials/{{credentialId}}"): WRITE,
    ("GET", f"{_A}/environments"): READ,
    ("POST", f"{_A}/environments"): WRITE,
    ("POST", f"{_A}/environments/import"): WRITE,
    ("GET", f"{_A}/environments/{{id}}"): READ,
    ("PATCH", f"{_A}/environments/{{id}}"): WRITE,
    ("PUT", f"{_A}/environments/{{id}}"): WRITE,
    ("DELETE", f"{_A}/environments/{{id}}"): WRITE,
    ("GET", f"{_A}/environments/{{id}}/export"): READ,
    ("GET", f"{_A}/devices"): READ,
    ("GET", f"{_A}/credentials"): READ,
    ("POST", f"{_A}/credentials"): ADMIN,
    ("POST", f"{_A}/credentials/import"): ADMIN,
    ("GET", f"{_A}/credentials/{{id}}"): READ,
    ("PATCH", f"{_A}/credentials/{{id}}"): ADMIN,
    ("PUT", f"{_A}/credentials/{{id}}"): ADMIN,
    ("DELETE", f"{_A}/credentials/{{id}}"): ADMIN,
    ("GET", f"{_A}/credentials/{{id}}/export"): READ,
    ("GET", f"{_A}/snippets"): READ,
    ("POST", f"{_A}/snippets"): WRITE,
    ("POST", f"{_A}/snippets/import"): WRITE,
    ("GET", f"{_A}/snippets/{{id}}"): READ,
    ("PATCH", f"{_A}/snippets/{{id}}"): WRITE,
    ("PUT", f"{_A}/snippets/{{id}}"): WRITE,
    ("DELETE", f"{_A}/snippets/{{id}}"): WRITE,
    ("GET", f"{_A}/snippets/{{id}}/export"): READ,
    ("GET", f"{_A}/sessions"): READ,
    ("GET", f"{_A}/sessions/{{id}}"): READ,
    ("DELETE", f"{_A}/sessions/{{id}}"): ADMIN,
    ("GET", f"{_A}/schedules"): READ,
    ("POST", f"{_A}/schedules"): ADMIN,
    ("POST", f"{_A}/schedules/import"): ADMIN,
    ("GET", f"{_A}/schedules/{{id}}"): READ,
    ("PATCH", f"{_A}/schedules/{{id}}"): ADMIN,
    ("PUT", f"{_A}/schedules/{{id}}"): ADMIN,
    ("DELETE", f"{_A}/schedules/{{id}}"): ADMIN,
    ("GET", f"{_A}/schedules/{{id}}/export"): READ,
    ("GET", f"{_A}/run"): READ,
    ("POST", f"{_A}/run"): RUN,
    ("GET", f"{_A}/run/{{id}}"): READ,
    ("POST", f"{_A}/run/{{id}}/cancel"): RUN,
    ("GET", f"{_A}/run/{{id}}/artifacts/{{name}}"): READ,
    ("POST", f"{_A}/authoring"): RUN,
    ("GET", f"{_A}/authoring/{{id}}"): READ,
    ("DELETE", f"{_A}/authoring/{{id}}"): RUN,
    ("POST", f"{_A}/authoring/{{id}}/exec"): RUN,
    # saving writes a scenario: a change of the checks, not a run
    ("POST", f"{_A}/authoring/{{id}}/save"): WRITE,
    ("GET", f"{_A}/audit"): ADMIN,
}

#: The scope each MCP tool needs; ``tools/list`` shows a token only the tools it may call.
TOOL_SCOPES: Mapping[str, Scope] = {
    "list_scenarios": READ,
    "get_scenario": READ,
    "create_scenario": WRITE,
    "update_scenario": WRITE,
    "delete_scenario": WRITE,
    "create_step": WRITE,
    "update_step": WRITE,
    "delete_step": WRITE,
    "list_revisions": READ,
    "diff_revisions": READ,
    "restore_revision": WRITE,
    "list_environments": READ,
    "create_environment": WRITE,
    "update_environment": WRITE,
    "run_scenario": RUN,
    "get_run": READ,
    "list_schedules": READ,
    "create_schedule": ADMIN,
    "update_schedule": ADMIN,
    "delete_schedule": ADMIN,
    "authoring_start": RUN,
    "authoring_exec": RUN,
    "authoring_snapshot": READ,
    "authoring_save": WRITE,
    "authoring_end": RUN,
    "list_runs": READ,
    "cancel_run": RUN,
    "get_scenario_stats": READ,
    "list_snippets": READ,
    "get_snippet": READ,
    "list_credentials": READ,
    "list_sessions": READ,
    "delete_environment": WRITE,
    "export_yaml": READ,  # never with secrets
    "import_yaml": WRITE,  # a credential or schedule in it needs admin, as over REST (the service checks)
    "get_health": READ,
}

#: The scope a YAML export asking for secrets needs, whatever its route's.
SECRETS_SCOPE = ADMIN


def route_scope(method: str, template: str) -> Scope | None:
    """The scope the table gives a route (``HEAD`` as ``GET``); ``admin`` for a route it misses."""
    method = "GET" if method == "HEAD" else method
    try:
        return ROUTE_SCOPES[(method, template)]
    except KeyError:
        log.error(
            "route %s %s has no scope in scenariokit_server.access: only admin may call it", method, template
        )
        return ADMIN


def needed_scope(request: web.Request) -> Scope | None:
    """The scope ``request`` needs: its route's; ``admin`` for an export with secrets; ``read`` (any
    token) for a protected path with no route, so an unknown path tells nothing to a caller without one."""
    route = request.match_info.route
    resource = route.resource
    if request.match_info.http_exception is not None or resource is None:
        return READ if request.path.startswith(PROTECTED_PREFIXES) else OPEN
    needed = route_scope(request.method, resource.canonical)
    if request.query.get("includeSecrets", "").lower() in ("true", "1"):
        return max(needed or READ, SECRETS_SCOPE)
    return needed


def token_of(header: str, secrets: list[tuple[bytes, ApiToken]]) -> ApiToken | None:
    """The token an ``Authorization: Bearer`` header carries, when its secret is one of ``secrets``
    (each token with its secret encoded, once for all requests).

    Every token is compared, so the time taken says nothing of which one matched.
    """
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    candidate = given.strip().encode()
    found = None
    for secret, token in secrets:
        if hmac.compare_digest(candidate, secret):
            found = token
    return found


def scope_problem(needed: Scope, token: ApiToken) -> web.Response:
    """The 403 answer to a token whose scope does not hold ``needed``, naming the scope needed."""
    who = f"token {token.name!r}" if token.name else "this token"
    return problem(
        403, f"this request needs a token with scope {needed.label!r}; {who} has scope {token.scope.label!r}"
    )


def authorize(settings: Settings, links: ArtifactLinks | None = None) -> Middleware:
    """The middleware that checks each request's token against its route's scope and names its caller.

    CORS preflight (``OPTIONS``) passes: browsers send it without credentials. An artifact requested
    with a valid signed link (``links``, see :mod:`scenariokit_server.trace`) passes: that is how the
    trace viewer and a report's ``<img>`` fetch it. A report page without a token answers 401 with the
    form that asks for one (:func:`scenariokit_server.reports.token_page`), holding no data.
    """
    tokens = settings.tokens
    links = links or ArtifactLinks()
    secrets = [(token.secret.encode(), token) for token in tokens]
    # Who is calling, made once for each door and token: a request only picks its own.
    tokenless = {door: Caller(door=door, scope=READ if tokens else None) for door in DOORS}
    bearers = {id(token): {door: Caller(door, token.name, token.scope) for door in DOORS} for token in tokens}

    @web.middleware
    async def authorize_request(request: web.Request, handler: Handler) -> web.StreamResponse:
        door: Door = "mcp" if request.path.startswith("/mcp") else "rest"
        caller = tokenless[door]
        if tokens and request.method != "OPTIONS":
            needed = needed_scope(request)
            if needed is not OPEN:
                token = token_of(request.headers.get("Authorization", ""), secrets)
                if token is None:
                    if is_report_page(request.path):
                        return token_page()
                    if not links.allows(request):
                        raise web.HTTPUnauthorized(
                            text="a valid 'Authorization: Bearer <token>' header is required",
                            headers={"WWW-Authenticate": f'Bearer realm="{REALM}"'},
                        )
                elif not token.allows(needed):
                    return scope_problem(needed, token)
                else:
                    caller = bearers[id(token)][door]
        request[keys.CALLER] = caller
        with calling_as(caller):
            return await handler(request)

    return authorize_request
