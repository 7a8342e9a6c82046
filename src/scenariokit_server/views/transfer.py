"""YAML export and import of scenarios, environments, credentials and snippets."""

from __future__ import annotations

import uuid

from aiohttp import web
from aiohttp.typedefs import Handler

from scenariokit_server import keys, schemas
from scenariokit_server.boundary import YAML_TYPES, accepts_yaml
from scenariokit_server.openapi import YAML, YAML_DOCUMENTS, YAML_TEXT, export_params, operation
from scenariokit_server.views import (
    flag_param,
    ids_param,
    ok,
    only_params,
    path_id,
    query_params,
    yaml_response,
)

_SCENARIO_EXPORT_PARAMS = ("ids", "includeEnvironment", "credentialIds", "includeSecrets")


async def _export_scenarios(
    request: web.Request, ids: list[uuid.UUID] | None, params: tuple[str, ...]
) -> web.Response:
    values = query_params(request)
    only_params(values, params)
    text = await keys.services(request).transfer.export_scenarios(
        ids,
        include_environment=flag_param(values, "includeEnvironment"),
        credential_ids=ids_param(values, "credentialIds") or (),
        include_secrets=flag_param(values, "includeSecrets"),
    )
    return yaml_response(text)


@operation(
    "transfer",
    "Export scenarios as a YAML stream",
    description="Sections `# environments` (with `includeEnvironment`), `# credentials` (those in "
    "`credentialIds`) and `# scenarios`.",
    response=YAML_TEXT,
    response_types=(YAML,),
    params=export_params(scenarios=True, many=True),
    errors=(400, 404),
)
async def export_scenarios(request: web.Request) -> web.Response:
    """Export every scenario, or those in ``ids``."""
    return await _export_scenarios(request, ids_param(query_params(request), "ids"), _SCENARIO_EXPORT_PARAMS)


@operation(
    "transfer",
    "Export one scenario as a YAML stream",
    description="The scenario as a YAML stream (`application/yaml`) that `POST /api/v1/scenarios/import` "
    "reads back; `includeEnvironment` and `credentialIds` add what it uses.",
    response=YAML_TEXT,
    response_types=(YAML,),
    params=export_params(scenarios=True),
    errors=(400, 404),
)
async def export_scenario(request: web.Request) -> web.Response:
    """Export one scenario."""
    return await _export_scenarios(request, [path_id(request)], _SCENARIO_EXPORT_PARAMS[1:])


@operation(
    "transfer",
    "Export an environment as YAML",
    description="The environment as a YAML stream (`application/yaml`) that `POST "
    "/api/v1/environments/import` reads back.",
    response=YAML_TEXT,
    response_types=(YAML,),
    params=export_params(),
    errors=(400, 404),
)
async def export_environment(request: web.Request) -> web.Response:
    """Export one environment."""
    values = query_params(request)
    only_params(values, ("includeSecrets",))
    transfer = keys.services(request).transfer
    text = await transfer.export_environment(
        path_id(request), include_secrets=flag_param(values, "includeSecrets")
    )
    return yaml_response(text)


@operation(
    "transfer",
    "Export a credential as YAML",
    description="The credential as a YAML stream (`application/yaml`); its secret is written only with "
    "`includeSecrets=true`.",
    response=YAML_TEXT,
    response_types=(YAML,),
    params=export_params(),
    errors=(400, 404, 503),
)
async def export_credential(request: web.Request) -> web.Response:
    """Export one credential; its secret only with ``includeSecrets=true``."""
    values = query_params(request)
    only_params(values, ("includeSecrets",))
    transfer = keys.services(request).transfer
    text = await transfer.export_credential(
        path_id(request), include_secrets=flag_param(values, "includeSecrets")
    )
    return yaml_response(text)


@operation(
    "transfer",
    "Export a snippet as YAML",
    description="The snippet as a YAML stream (`application/yaml`) that `POST /api/v1/snippets/import` "
    "reads back.",
    response=YAML_TEXT,
    response_types=(YAML,),
    errors=(400, 404),
)
async def export_snippet(request: web.Request) -> web.Response:
    """Export one snippet."""
    only_params(query_params(request), ())
    return yaml_response(await keys.services(request).transfer.export_snippet(path_id(request)))


def _importer(kind: str, summary: str) -> Handler:
    async def import_yaml(request: web.Request) -> web.Response:
        report = await keys.services(request).transfer.import_yaml(await request.read(), kind=kind)
        return ok(report.to_json())

    import_yaml.__name__ = f"import_{kind}s"
    import_yaml.__doc__ = f"{summary}: the ids created and updated."
    document = operation(
        "transfer",
        summary,
        description="Upserts by id in one transaction; a malformed document or a wrong `kind` "
        "changes nothing.",
        body=YAML_DOCUMENTS,
        body_types=YAML_TYPES,
        body_required=False,
        response=schemas.ImportReport,
        errors=(400, 409, 413),
    )
    return document(accepts_yaml(import_yaml))


import_scenarios = _importer("scenario", "Import scenarios from YAML")
import_environments = _importer("environment", "Import environments from YAML")
import_credentials = _importer("credential", "Import credentials from YAML")
import_snippets = _importer("snippet", "Import snippets from YAML")
import_schedules = _importer("schedule", "Import schedules from YAML")


@operation(
    "transfer",
    "Export a schedule as YAML",
    description="The schedule as a YAML stream (`application/yaml`).",
    response=YAML_TEXT,
    response_types=(YAML,),
    errors=(400, 404),
)
async def export_schedule(request: web.Request) -> web.Response:
    """Export one schedule."""
    only_params(query_params(request), ())
    return yaml_response(await keys.services(request).transfer.export_schedule(path_id(request)))
