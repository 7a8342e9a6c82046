"""``/api/v1/scenarios/{id}/credentials``: credentials linked to a scenario under an alias."""

from __future__ import annotations

from aiohttp import web

from scenariokit.domain.errors import NotFound
from scenariokit.formats.inputs import LinkInput
from scenariokit_server import keys, schemas
from scenariokit_server.openapi import operation
from scenariokit_server.views import API_PREFIX, body_as, created, no_content, ok, path_id


@operation(
    "scenarios",
    "List a scenario's credential links",
    description="The credentials linked to the scenario, each with the alias step code reads it by "
    "(`helpers.credentials[alias]`); not paged.",
    response=schemas.CredentialLink(many=True),
    errors=(400, 404),
)
async def list_links(request: web.Request) -> web.Response:
    """The credentials linked to a scenario, with their aliases (not paged)."""
    services = keys.services(request)
    links = await services.scenarios.list_links(path_id(request))
    return ok([services.converter.unstructure(link) for link in links])


@operation(
    "scenarios",
    "Link a credential under an alias",
    description="The alias is unique within the scenario (409), and a credential is linked once (409).",
    status=201,
    body=schemas.LinkInput,
    response=schemas.CredentialLink,
    errors=(400, 404, 409, 413),
)
async def create_link(request: web.Request) -> web.Response:
    """Link a credential to a scenario."""
    services = keys.services(request)
    scenario_id = path_id(request)
    link = await services.scenarios.link_credential(
        scenario_id, await body_as(request, LinkInput, "credential link")
    )
    location = f"{API_PREFIX}/scenarios/{scenario_id}/credentials/{link.credential_id}"
    return created(services.converter.unstructure(link), location)


@operation(
    "scenarios",
    "Read one credential link",
    description="The link of one credential to the scenario: the credential's id and its alias.",
    response=schemas.CredentialLink,
    errors=(400, 404),
)
async def get_link(request: web.Request) -> web.Response:
    """The link of one credential to a scenario."""
    services = keys.services(request)
    credential_id = path_id(request, "credentialId")
    scenario = await services.scenarios.get(path_id(request))
    link = scenario.link(credential_id)
    if link is None:
        raise NotFound("credential link", credential_id)
    return ok(services.converter.unstructure(link))


@operation(
    "scenarios",
    "Unlink a credential",
    description="The credential stays; the scenario no longer links it.",
    status=204,
    errors=(400, 404),
)
async def delete_link(request: web.Request) -> web.Response:
    """Remove a credential link."""
    await keys.services(request).scenarios.unlink_credential(
        path_id(request), path_id(request, "credentialId")
    )
    return no_content()
