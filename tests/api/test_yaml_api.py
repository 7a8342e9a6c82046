"""YAML export and import driven through the REST routes: content types, round trips and refusals.

The routes' parameters are tested in ``test_transfer.py``; here the YAML itself travels over HTTP.
"""

from __future__ import annotations

import time
from typing import Any

from api_support import API, Client, both_backends, created, problem_of

YAML_HEADERS = {"Content-Type": "application/yaml"}


async def seed(client: Client) -> dict[str, Any]:
    """An environment, a credential with a secret, and a scenario using both with multi-line code."""
    environment = await created(
        client, f"{API}/environments", {"name": "staging ünï", "data": {"url": "https://staging.example"}}
    )
    credential = await created(
        client, f"{API}/credentials", {"name": "admin", "username": "a", "secret": "pw"}
    )
    scenario = await created(
        client,
        f"{API}/scenarios",
        {
            "name": "Checkout 🛒",
            "description": "",
            "environmentId": environment["id"],
            "timeoutSeconds": 90,
            "credentials": [{"credentialId": credential["id"], "alias": "admin"}],
            "steps": [
                {
                    "title": "open",
                    "execCode": "await page.goto(helpers.getEnvUrl())\nif True:\n\tlog('x')  \n",
                },
                {"execCode": "log('no final newline')\nlog('here')", "timeoutSeconds": 2.5},
            ],
        },
    )
    return {"environment": environment, "credential": credential, "scenario": scenario}


async def export_text(client: Client, query: str) -> str:
    response = await client.get(f"{API}/scenarios/export?{query}")
    assert response.status == 200, await response.text()
    assert response.content_type == "application/yaml"
    assert response.charset == "utf-8"
    text: str = await response.text()
    return text


async def post_yaml(client: Client, resource: str, body: str | bytes) -> Any:
    return await client.post(f"{API}/{resource}/import", data=body, headers=YAML_HEADERS)


async def listing(client: Client) -> list[Any]:
    """Everything the API lists, to prove a refused import changed nothing."""
    return [
        (await (await client.get(f"{API}/{resource}?limit=200")).json())["items"]
        for resource in ("scenarios", "environments", "credentials", "snippets")
    ]


@both_backends
async def test_an_export_imported_over_http_into_an_empty_store_exports_the_same_text(client: Client) -> None:
    records = await seed(client)
    query = f"includeEnvironment=true&credentialIds={records['credential']['id']}&includeSecrets=true"
    text = await export_text(client, query)
    for resource in ("scenario", "credential", "environment"):  # empty the store, keeping the text
        deleted = await client.delete(f"{API}/{resource}s/{records[resource]['id']}")
        assert deleted.status == 204

    response = await post_yaml(client, "scenarios", text.encode())

    assert response.status == 200, await response.text()
    report = await response.json()
    assert report["counts"] == {"created": 3, "updated": 0}
    assert report["created"]["scenario"] == [records["scenario"]["id"]]
    assert await export_text(client, query) == text


async def test_single_exports_are_yaml_documents_that_import_back(client: Client) -> None:
    snippet = await created(
        client, f"{API}/snippets", {"alias": "login", "title": "Log in", "code": "a\nb\n"}
    )

    response = await client.get(f"{API}/snippets/{snippet['id']}/export")
    text = await response.text()

    assert response.content_type == "application/yaml"
    assert text.startswith(f"kind: snippet\nid: {snippet['id']}\n")
    assert "code: |\n  a\n  b\n" in text
    imported = await post_yaml(client, "snippets", text)
    assert (await imported.json())["updated"] == {"snippet": [snippet["id"]]}


async def test_both_formats_and_kindless_documents_import_through_the_environment_route(
    client: Client,
) -> None:
    body = "name: single\n---\n- name: listed one\n- kind: environment\n  name: listed two\n"

    response = await post_yaml(client, "environments", body)

    assert response.status == 200, await response.text()
    assert (await response.json())["counts"] == {"created": 3, "updated": 0}
    names = {item["name"] for item in (await (await client.get(f"{API}/environments")).json())["items"]}
    assert names == {"single", "listed one", "listed two"}


async def test_a_bad_document_gives_400_naming_document_and_line_and_changes_nothing(client: Client) -> None:
    records = await seed(client)
    before = await listing(client)
    body = (
        f"kind: environment\nid: {records['environment']['id']}\nname: renamed\n"
        "---\nkind: scenario\nname: broken\nsteps:\n  - title: no code\n"
    )

    problem = await problem_of(await post_yaml(client, "scenarios", body), 400)

    assert "documents[1].steps[0].execCode (line 8)" in problem["detail"]
    assert problem["errors"] == {"documents[1].steps[0].execCode": "line 8: is required"}
    assert await listing(client) == before


async def test_malformed_yaml_gives_400_with_document_and_line(client: Client) -> None:
    problem = await problem_of(await post_yaml(client, "scenarios", "name: ok\n---\nname: [oops\n"), 400)

    assert problem["errors"].keys() == {"documents[1]"}
    assert problem["errors"]["documents[1]"].startswith("line 4: malformed YAML")


async def test_a_kind_that_does_not_fit_the_route_gives_400_naming_the_document(client: Client) -> None:
    body = "kind: credential\nname: c\n---\nkind: snippet\nalias: a\ntitle: t\n"

    problem = await problem_of(await post_yaml(client, "credentials", body), 400)

    assert list(problem["errors"]) == ["documents[1].kind"]
    assert "does not fit the credential import" in problem["detail"]
    assert (await (await client.get(f"{API}/credentials")).json())["total"] == 0


async def test_a_python_object_tag_gives_400_and_runs_nothing(client: Client) -> None:
    body = "kind: scenario\nname: !!python/object/apply:os.system ['echo pwned']\n"

    problem = await problem_of(await post_yaml(client, "scenarios", body), 400)

    why = "the tag !!python/object/apply:os.system is not allowed: only plain YAML data loads"
    assert problem["errors"] == {"documents[0].name": f"line 2: {why}"}


async def test_a_billion_laughs_gives_413_fast(client: Client) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    body = "\n".join([*lines, "data: *a9"])

    started = time.perf_counter()
    problem = await problem_of(await post_yaml(client, "environments", body), 413)

    assert time.perf_counter() - started < 1
    assert "aliases expand" in problem["detail"]


async def test_a_body_over_five_mebibytes_gives_413(client: Client) -> None:
    body = b"name: x\n#" + b"x" * (5 * 1024 * 1024)

    await problem_of(await post_yaml(client, "scenarios", body), 413)


async def test_a_snippet_alias_taken_by_another_snippet_gives_409(client: Client) -> None:
    await created(client, f"{API}/snippets", {"alias": "login", "title": "Log in"})

    problem = await problem_of(await post_yaml(client, "snippets", "alias: login\ntitle: Another\n"), 409)

    assert "alias 'login'" in problem["detail"]
    items = (await (await client.get(f"{API}/snippets")).json())["items"]
    assert [item["title"] for item in items] == ["Log in"]
