"""The YAML export and import routes: parameters, content types and statuses.

What the YAML holds is the transfer service's business, tested with it; here the HTTP side.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from api_support import API, Client, ClientFactory, created, problem_of

from scenariokit.services import Services


@pytest.fixture(autouse=True)
def _needs_transfer(services: Services) -> None:
    if not hasattr(services, "transfer"):
        pytest.skip("the YAML transfer service (services.transfer) is not part of this build yet")


@pytest.fixture
async def three(client: Client) -> list[dict[str, Any]]:
    """Three scenarios, the first with an environment."""
    environment = await created(
        client, f"{API}/environments", {"name": "env-one", "data": {"url": "http://x"}}
    )
    first = await created(client, f"{API}/scenarios", {"name": "alpha", "environmentId": environment["id"]})
    return [first] + [await created(client, f"{API}/scenarios", {"name": name}) for name in ("beta", "gamma")]


async def _yaml(response: Any) -> str:
    assert response.status == 200, await response.text()
    assert response.content_type == "application/yaml"
    text: str = await response.text()
    return text


async def test_export_all_scenarios(client: Client, three: list[dict[str, Any]]) -> None:
    text = await _yaml(await client.get(f"{API}/scenarios/export"))
    assert "# scenarios" in text and all(s["name"] in text for s in three)
    assert "# environments" not in text


@pytest.mark.parametrize("style", ["repeated", "comma", "mixed"])
async def test_ids_are_repeatable_or_comma_separated(
    client: Client, three: list[dict[str, Any]], style: str
) -> None:
    first, second = three[0]["id"], three[1]["id"]
    query = {
        "repeated": f"ids={first}&ids={second}",
        "comma": f"ids={first},{second}",
        "mixed": f"ids={first},&ids=+{second}+",
    }[style]
    text = await _yaml(await client.get(f"{API}/scenarios/export?{query}"))
    assert "alpha" in text and "beta" in text and "gamma" not in text


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("ids=nope", "ids"),
        ("ids=54d83861-44b0-482c-ab50-ca89082f1c20,12", "ids"),  # a fixed id: xdist workers collect alike
        ("credentialIds=x", "credentialIds"),
        ("includeEnvironment=yes", "includeEnvironment"),
        ("includeSecrets=2", "includeSecrets"),
        ("format=json", "format"),
    ],
)
async def test_bad_export_parameters_give_400_naming_them(client: Client, query: str, param: str) -> None:
    problem = await problem_of(await client.get(f"{API}/scenarios/export?{query}"), 400)
    assert param in problem["errors"]


@pytest.mark.parametrize("flag", ["true", "1", "TRUE"])
async def test_include_environment_flag(client: Client, three: list[dict[str, Any]], flag: str) -> None:
    text = await _yaml(await client.get(f"{API}/scenarios/{three[0]['id']}/export?includeEnvironment={flag}"))
    assert "# environments" in text and "env-one" in text
    text = await _yaml(await client.get(f"{API}/scenarios/{three[0]['id']}/export?includeEnvironment=0"))
    assert "env-one" not in text


async def test_credentials_are_exported_only_when_named_and_secrets_only_on_request(client: Client) -> None:
    credential = await created(client, f"{API}/credentials", {"name": "admin", "secret": "s3cr3t-value"})
    scenario = await created(client, f"{API}/scenarios", {"name": "s"})
    base = f"{API}/scenarios/{scenario['id']}/export"
    assert "admin" not in await _yaml(await client.get(base))
    text = await _yaml(await client.get(f"{base}?credentialIds={credential['id']}"))
    assert "admin" in text and "s3cr3t-value" not in text
    text = await _yaml(await client.get(f"{base}?credentialIds={credential['id']}&includeSecrets=true"))
    assert "s3cr3t-value" in text
    single = await _yaml(await client.get(f"{API}/credentials/{credential['id']}/export"))
    assert "kind: credential" in single and "s3cr3t-value" not in single
    assert "s3cr3t-value" in await _yaml(
        await client.get(f"{API}/credentials/{credential['id']}/export?includeSecrets=1")
    )


async def test_missing_records_give_404(client: Client) -> None:
    missing = uuid.uuid4()
    for path in ("scenarios", "environments", "credentials", "snippets"):
        await problem_of(await client.get(f"{API}/{path}/{missing}/export"), 404)
    await problem_of(await client.get(f"{API}/scenarios/export?ids={missing}"), 404)
    await problem_of(await client.get(f"{API}/snippets/not-an-id/export"), 400)


@pytest.mark.parametrize("resource", ["environments", "credentials", "snippets", "scenarios"])
async def test_export_then_import_updates_in_place(client: Client, resource: str) -> None:
    body = {"alias": "login", "title": "Log in"} if resource == "snippets" else {"name": "thing"}
    record = await created(client, f"{API}/{resource}", body)
    text = await _yaml(await client.get(f"{API}/{resource}/{record['id']}/export"))
    response = await client.post(
        f"{API}/{resource}/import", data=text, headers={"Content-Type": "application/yaml"}
    )
    assert response.status == 200, await response.text()
    report = await response.json()
    assert report["counts"] == {"created": 0, "updated": 1}
    assert record["id"] in [ident for ids in report["updated"].values() for ident in ids]


async def test_import_errors(make_client: ClientFactory) -> None:
    client = await make_client(max_body_bytes=256)
    yaml = {"Content-Type": "application/yaml"}
    problem = await problem_of(
        await client.post(f"{API}/scenarios/import", data=b"name: [unclosed", headers=yaml), 400
    )
    assert problem["detail"]
    await problem_of(
        await client.post(f"{API}/snippets/import", data=b"kind: scenario\nname: x\n", headers=yaml), 400
    )
    await problem_of(
        await client.post(f"{API}/scenarios/import", data=b"name: x\n" + b"#" * 512, headers=yaml), 413
    )
