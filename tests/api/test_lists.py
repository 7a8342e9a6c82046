"""Paging, sorting and filtering, the same on every list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from api_support import API, Client, both_backends, problem_of, seed_session

from scenariokit.services import Services

COUNT = 7
Seed = Callable[[Services], Awaitable[str]]


async def _scenarios(services: Services) -> str:
    for i in range(COUNT):
        await services.scenarios.create({"name": f"item-{i % 3}-{i}"})
    return f"{API}/scenarios"


async def _environments(services: Services) -> str:
    for i in range(COUNT):
        await services.environments.create({"name": f"item-{i % 3}-{i}"})
    return f"{API}/environments"


async def _credentials(services: Services) -> str:
    for i in range(COUNT):
        await services.credentials.create({"name": f"item-{i % 3}-{i}", "secret": "s"})
    return f"{API}/credentials"


async def _snippets(services: Services) -> str:
    for i in range(COUNT):
        await services.snippets.create({"alias": f"item{i}", "title": f"title-{i % 2}"})
    return f"{API}/snippets"


async def _sessions(services: Services) -> str:
    for i in range(COUNT):
        await seed_session(services, name=f"run-{i % 3}-{i}")
    return f"{API}/sessions"


async def _seed_runs(services: Services) -> str:
    environment = await services.environments.create({"name": "env"})
    scenarios = [await services.scenarios.create({"name": f"scenario-{i}"}) for i in range(3)]
    for i in range(COUNT):
        run = await services.runs.create(
            {"scenarioId": str(scenarios[i % 3].id), "environmentId": str(environment.id)}
        )
        if i % 2:
            await services.runs.cancel(run.id)
    return str(scenarios[0].id)


async def _runs(services: Services) -> str:
    await _seed_runs(services)
    return f"{API}/run"


async def _scenario_runs(services: Services) -> str:
    return f"{API}/scenarios/{await _seed_runs(services)}/runs"


LISTS: dict[str, tuple[Seed, tuple[str, ...]]] = {
    "scenarios": (_scenarios, ("name", "createdAt", "updatedAt")),
    "environments": (_environments, ("name", "createdAt", "updatedAt")),
    "credentials": (_credentials, ("name", "createdAt", "updatedAt")),
    "snippets": (_snippets, ("alias", "title", "createdAt", "updatedAt")),
    "sessions": (_sessions, ("name", "status", "createdAt")),
    "runs": (_runs, ("createdAt", "status", "scenario.name")),
    "scenario runs": (_scenario_runs, ("createdAt", "status", "scenario.name")),
}


def _value(item: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        item = item[part]
    return item


async def _all_pages(client: Client, url: str, limit: int, **params: str) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    page, total = 1, None
    while True:
        response = await client.get(url, params={"page": str(page), "limit": str(limit), **params})
        assert response.status == 200, await response.text()
        body = await response.json()
        assert (body["page"], body["limit"]) == (page, limit)
        assert total in (None, body["total"])
        total = body["total"]
        assert len(body["items"]) <= limit
        if not body["items"]:
            return items, total
        items.extend(body["items"])
        page += 1


@pytest.mark.parametrize("name", list(LISTS))
async def test_paging_returns_every_item_exactly_once(client: Client, services: Services, name: str) -> None:
    url = await LISTS[name][0](services)
    expected = (await (await client.get(url, params={"limit": "200"})).json())["items"]
    items, total = await _all_pages(client, url, limit=3)
    assert total == len(expected) == len(items)
    assert sorted(item["id"] for item in items) == sorted(item["id"] for item in expected)
    assert len({item["id"] for item in items}) == len(items)


@both_backends
async def test_paging_on_each_backend(client: Client, services: Services) -> None:
    url = await _scenarios(services)
    items, total = await _all_pages(client, url, limit=2, orderBy="name", orderDir="asc")
    assert total == COUNT == len({item["id"] for item in items})
    assert [i["name"] for i in items] == sorted(i["name"] for i in items)


@pytest.mark.parametrize("name", list(LISTS))
async def test_every_allowed_sort_orders_the_list(client: Client, services: Services, name: str) -> None:
    seed, keys = LISTS[name]
    url = await seed(services)
    for key in keys:
        for direction in ("asc", "desc"):
            items, total = await _all_pages(client, url, limit=3, orderBy=key, orderDir=direction)
            assert len({item["id"] for item in items}) == total
            ranks = [(_value(item, key), item["id"]) for item in items]
            assert ranks == sorted(ranks, reverse=direction == "desc"), (key, direction)


@pytest.mark.parametrize("name", list(LISTS))
async def test_unknown_order_by_is_refused_naming_the_allowed_values(
    client: Client, services: Services, name: str
) -> None:
    url = await LISTS[name][0](services)
    problem = await problem_of(await client.get(url, params={"orderBy": "password"}), 400)
    for allowed in LISTS[name][1]:
        assert allowed in problem["detail"] and allowed in problem["errors"]["orderBy"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"page": "0"}, "page"),
        ({"page": "x"}, "page"),
        ({"page": "10000000000000000000000"}, "page"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "1.5"}, "limit"),
        ({"orderDir": "up"}, "orderDir"),
        ({"color": "red"}, "color"),
        ({"q": "a\x00b"}, "q"),
    ],
)
async def test_bad_list_parameters_give_400_naming_them(
    client: Client, params: dict[str, str], field: str
) -> None:
    problem = await problem_of(await client.get(f"{API}/scenarios", params=params), 400)
    assert field in problem["errors"]


async def test_order_dir_error_names_the_allowed_values(client: Client) -> None:
    problem = await problem_of(await client.get(f"{API}/snippets", params={"orderDir": "sideways"}), 400)
    assert problem["errors"] == {"orderDir": "must be one of: asc, desc"}


async def test_defaults_are_first_page_of_twenty_newest_first(client: Client, services: Services) -> None:
    for i in range(25):
        await services.scenarios.create({"name": f"s{i:02}"})
    body = await (await client.get(f"{API}/scenarios")).json()
    assert (body["total"], body["page"], body["limit"], len(body["items"])) == (25, 1, 20, 20)
    updated = [item["updatedAt"] for item in body["items"]]
    assert updated == sorted(updated, reverse=True)


@pytest.mark.parametrize(
    ("resource", "q", "expected"),
    [
        ("scenarios", "ITEM-1", 2),
        ("environments", "-2-", 2),
        ("credentials", "item-0", 3),
        ("sessions", "RUN-", 7),
    ],
)
async def test_q_filters_names_case_insensitively(
    client: Client, services: Services, resource: str, q: str, expected: int
) -> None:
    url = await LISTS[resource][0](services)
    assert (await (await client.get(url, params={"q": q})).json())["total"] == expected


async def test_snippet_q_matches_alias_or_title(client: Client, services: Services) -> None:
    url = await _snippets(services)
    assert (await (await client.get(url, params={"q": "ITEM3"})).json())["total"] == 1
    assert (await (await client.get(url, params={"q": "title-1"})).json())["total"] == 3


async def test_runs_filter_by_status_and_scenario(client: Client, services: Services) -> None:
    scenario_id = await _seed_runs(services)
    failed = await (await client.get(f"{API}/run", params={"status": "fail"})).json()
    assert failed["total"] == 3 and {run["status"] for run in failed["items"]} == {"fail"}
    mine = await (await client.get(f"{API}/run", params={"scenarioId": scenario_id})).json()
    assert mine["total"] == 3 and {run["scenarioId"] for run in mine["items"]} == {scenario_id}
    problem = await problem_of(await client.get(f"{API}/run", params={"status": "done"}), 400)
    assert "in_progress" in problem["errors"]["status"]
    await problem_of(await client.get(f"{API}/run", params={"scenarioId": "x"}), 400)
