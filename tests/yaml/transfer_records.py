"""Records the YAML tests export and import, and a snapshot of a store to prove nothing changed."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from scenariokit.formats.queries import CredentialQuery, EnvironmentQuery, SnippetQuery
from scenariokit.formats.yaml_io import load_entities
from scenariokit.services import Services


@attrs.frozen
class FixtureSet:
    """The ids of the records :func:`populate` made."""

    environments: dict[str, uuid.UUID]
    credentials: dict[str, uuid.UUID]
    scenarios: dict[str, uuid.UUID]
    snippets: dict[str, uuid.UUID]


async def populate(services: Services) -> FixtureSet:
    """Records that exercise the format: multi-line code with tabs, trailing spaces and no final
    newline, unicode, empty and missing descriptions, several credentials and environments, whole and
    fractional timeouts."""
    env = services.environments
    staging = await env.create(
        {
            "name": "staging ünïcode",
            "description": "Staging.\nWith *markdown*.\n",
            "data": {
                "url": "https://staging.example.com",
                "nested": {"list": [1, 2.5, True, None, "x"], "multi": "line one\nline two"},
                "ключ": "значение",
                "yes": "no",
                "date": "2024-01-01",
            },
            "browser": {
                "device": "iPhone 13",
                "locale": "de-DE",
                "timezoneId": "Europe/Berlin",
                "geolocation": {"latitude": 52.52, "longitude": 13, "accuracy": 0.5},
                "permissions": ["geolocation"],
                "extraHTTPHeaders": {"X-Check": 'yes: it\'s "quoted"', "X-Empty": ""},
                "ignoreHTTPSErrors": True,
                "offline": False,
                "blockUrls": ["**/*.{png,jpg}", "https://*.tracker.example/**"],
            },
        }
    )
    prod = await env.create({"name": "prod", "data": {}})
    unused = await env.create({"name": "unused", "description": "not linked"})
    creds = services.credentials
    admin = await creds.create(
        {"name": "admin", "username": "admin", "secret": "s3cret!\n#x", "description": ""}
    )
    reader = await creds.create({"name": "reader", "description": "multi\nline"})
    spare = await creds.create({"name": "spare", "username": "spare", "secret": "spare-secret"})
    login = await services.scenarios.create(
        {
            "name": "Login flow 🚀",
            "description": "Logs in.\n\nThen checks the **dashboard**.",
            "environmentId": str(staging.id),
            "timeoutSeconds": 120,
            "browser": {
                "viewport": {"width": 390, "height": 844},
                "colorScheme": "dark",
                "userAgent": "scenariokit: 'check' #1",
                "httpCredentials": {"credential": "admin"},
                "video": "retain-on-failure",
            },
            "credentials": [
                {"credentialId": str(admin.id), "alias": "admin"},
                {"credentialId": str(reader.id), "alias": "ro"},
            ],
            "steps": [
                {
                    "title": "open",
                    "execCode": "await page.goto(helpers.getEnvUrl())\nawait expect(page).to_be_ok()\n",
                    "timeoutSeconds": 10,
                },
                {"execCode": "if True:\n\tlog('tab')  \nlog('trailing spaces')   ", "timeoutSeconds": 2.5},
                {"title": "", "execCode": "log('single line')"},
            ],
        }
    )
    empty = await services.scenarios.create(
        {"name": "Empty description", "description": "", "environmentId": str(prod.id), "timeoutSeconds": 0.5}
    )
    bare = await services.scenarios.create(
        {
            "name": "No description",
            "steps": [
                {"execCode": "x = 1\n\n\n"},
                {"execCode": "  # leading spaces\nline = 1\r\nwith_cr = 2"},
            ],
        }
    )
    snippet = await services.snippets.create(
        {"alias": "login", "title": "Log in", "code": "await page.fill('#user', args[0])\nreturn True\n"}
    )
    return FixtureSet(
        environments={"staging": staging.id, "prod": prod.id, "unused": unused.id},
        credentials={"admin": admin.id, "reader": reader.id, "spare": spare.id},
        scenarios={"login": login.id, "empty": empty.id, "bare": bare.id},
        snippets={"login": snippet.id},
    )


async def snapshot(services: Services) -> dict[str, Any]:
    """Everything stored, secrets and timestamps included: equal snapshots mean nothing changed."""
    async with services.store.unit_of_work() as uow:
        scenarios = await uow.scenarios.get_many(await uow.scenarios.all_ids())
        environments = (await uow.environments.list(EnvironmentQuery(limit=200))).items
        credentials = (await uow.credentials.list(CredentialQuery(limit=200))).items
        snippets = (await uow.snippets.list(SnippetQuery(limit=200))).items
    return {
        "scenarios": sorted(scenarios, key=lambda s: s.id),
        "environments": sorted(environments, key=lambda e: e.id),
        "credentials": sorted(((c, c.secret) for c in credentials), key=lambda pair: pair[0].id),
        "snippets": sorted(snippets, key=lambda s: s.id),
    }


def documents(text: str) -> list[dict[str, Any]]:
    """The entities of a YAML stream, as plain data."""
    return [entity.data for entity in load_entities(text)]
