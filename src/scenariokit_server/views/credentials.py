"""``/api/v1/credentials``: usernames and secrets step code reads by alias; the secret is write-only."""

from __future__ import annotations

from aiohttp import web

from scenariokit.formats import presenters as shape
from scenariokit.formats.inputs import CredentialInput, Patch
from scenariokit.formats.queries import CredentialQuery
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import list_params, operation
from scenariokit_server.views import API_PREFIX, body_as, created, no_content, ok, path_id, query_params


@operation(
    "credentials",
    "List credentials",
    description="One page of credentials without their secrets (`hasSecret` says whether one is stored). "
    "`q` keeps the credentials whose name holds it (any case).",
    response=schemas.CredentialPage,
    params=list_params(CredentialQuery),
    errors=(400, 503),
)
async def list_credentials(request: web.Request) -> web.Response:
    """One page of credentials, without their secrets."""
    services = keys.services(request)
    page = await services.credentials.list(CredentialQuery.from_params(query_params(request)))
    return ok(shape.page_json(page, lambda item: shape.credential_json(services.converter, item)))


@operation(
    "credentials",
    "Create a credential",
    description="`secret` is write-only: responses carry `hasSecret` instead.",
    status=201,
    body=schemas.CredentialInput,
    response=schemas.Credential,
    errors=(400, 413),
)
async def create_credential(request: web.Request) -> web.Response:
    """Create a credential."""
    services = keys.services(request)
    credential = await services.credentials.create(await body_as(request, CredentialInput, "credential"))
    location = f"{API_PREFIX}/credentials/{credential.id}"
    return created(shape.credential_json(services.converter, credential), location)


@operation(
    "credentials",
    "Read a credential (without its secret)",
    description="The credential's name, username and whether a secret is stored; the secret itself is "
    "never returned.",
    response=schemas.Credential,
    errors=(400, 404, 503),
)
async def get_credential(request: web.Request) -> web.Response:
    """One credential."""
    services = keys.services(request)
    credential = await services.credentials.get(path_id(request))
    return ok(shape.credential_json(services.converter, credential))


@operation(
    "credentials",
    "Change some fields of a credential",
    description="Without `secret` the stored secret is kept.",
    body=schemas.CredentialInput(partial=True),
    response=schemas.Credential,
    errors=(400, 404, 413, 503),
)
async def patch_credential(request: web.Request) -> web.Response:
    """Partial update."""
    services = keys.services(request)
    credential = await services.credentials.update(
        path_id(request), await body_as(request, Patch[CredentialInput], "credential")
    )
    return ok(shape.credential_json(services.converter, credential))


@operation(
    "credentials",
    "Replace a credential",
    description="A `secret` that is absent or null keeps the stored one; an empty string clears it.",
    body=schemas.CredentialInput,
    response=schemas.Credential,
    errors=(400, 404, 413, 503),
)
async def put_credential(request: web.Request) -> web.Response:
    """Full update."""
    services = keys.services(request)
    credential = await services.credentials.replace(
        path_id(request), await body_as(request, CredentialInput, "credential")
    )
    return ok(shape.credential_json(services.converter, credential))


@operation(
    "credentials",
    "Delete a credential",
    description="A credential linked to a scenario cannot be deleted (409): unlink it first.",
    status=204,
    errors=(400, 404, 409),
)
async def delete_credential(request: web.Request) -> web.Response:
    """Delete a credential."""
    await keys.services(request).credentials.delete(path_id(request))
    return no_content()
