"""``/api/v1/schedules``: CRUD, pause and resume, refusals by field, YAML ``kind: schedule``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest
from api_support import API, Client, both_backends, created, problem_of


async def _targets(client: Client) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scenario = await created(client, f"{API}/scenarios", {"name": "ping"})
    envs = [
        await created(client, f"{API}/environments", {"name": f"e{i}", "data": {"url": f"http://h{i}"}})
        for i in range(2)
    ]
    return scenario, envs


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@both_backends
async def test_a_schedule_is_created_read_paused_resumed_and_deleted(client: Client) -> None:
    scenario, envs = await _targets(client)
    body = {
        "scenarioId": scenario["id"],
        "environmentIds": [env["id"] for env in envs],
        "cron": "*/5 * * * *",
        "timezone": "Europe/Berlin",
    }
    schedule = await created(client, f"{API}/schedules", body)
    assert set(schedule) == {
        *("id", "scenarioId", "environmentIds", "cron", "intervalSeconds", "timezone", "enabled"),
        *("lastFiredAt", "nextFireAt", "createdAt", "updatedAt"),
    }
    assert (
        schedule["enabled"] is True
        and schedule["lastFiredAt"] is None
        and schedule["intervalSeconds"] is None
    )
    assert _at(schedule["nextFireAt"]).minute % 5 == 0
    path = f"{API}/schedules/{schedule['id']}"
    assert await (await client.get(path)).json() == schedule

    paused = await (await client.patch(path, json={"enabled": False})).json()
    assert paused["enabled"] is False and paused["nextFireAt"] is None
    resumed = await (await client.patch(path, json={"enabled": True})).json()
    assert resumed["nextFireAt"] is not None
    switched = await client.patch(path, json={"cron": None, "intervalSeconds": 60})
    assert (await switched.json())["intervalSeconds"] == 60
    listed = await (await client.get(f"{API}/schedules", params={"scenarioId": scenario["id"]})).json()
    assert [item["id"] for item in listed["items"]] == [schedule["id"]]

    exported = await client.get(f"{path}/export")
    text = await exported.text()
    assert "kind: schedule" in text and "intervalSeconds: 60" in text and "cron" not in text
    assert (await client.delete(path)).status == 204
    await problem_of(await client.get(path), 404)
    imported = await client.post(
        f"{API}/schedules/import", data=text, headers={"Content-Type": "application/yaml"}
    )
    assert imported.status == 200, await imported.text()
    back = await (await client.get(path)).json()
    assert (back["intervalSeconds"], back["environmentIds"]) == (60, [env["id"] for env in envs])


def _bad(scenario: dict[str, Any], envs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, str]]:
    base = {"scenarioId": scenario["id"], "environmentIds": [envs[0]["id"]]}
    return [
        ({**base}, "cron", "exactly one"),
        ({**base, "cron": "* * * * *", "intervalSeconds": 5}, "cron", "exactly one"),
        ({**base, "cron": "61 * * * *"}, "cron", "not a valid cron"),
        ({**base, "cron": "@daily"}, "cron", "5 fields"),
        ({**base, "intervalSeconds": 0}, "intervalSeconds", "from 1"),
        ({**base, "intervalSeconds": "5"}, "intervalSeconds", "whole number"),
        ({**base, "cron": "0 * * * *", "timezone": "Nowhere/Land"}, "timezone", "IANA"),
        ({**base, "intervalSeconds": 5, "environmentIds": []}, "environmentIds", "1 to 20"),
        (
            {**base, "intervalSeconds": 5, "environmentIds": [str(uuid.uuid4())]},
            "environmentIds[0]",
            "no environment",
        ),
        ({**base, "intervalSeconds": 5, "scenarioId": str(uuid.uuid4())}, "scenarioId", "no scenario"),
        ({**base, "intervalSeconds": 5, "enabled": "yes"}, "enabled", "true or false"),
        ({**base, "intervalSeconds": 5, "every": 5}, "every", "unknown field"),
    ]


@both_backends
async def test_bad_schedules_are_refused_by_field_and_nothing_is_stored(client: Client) -> None:
    scenario, envs = await _targets(client)
    for body, field, words in _bad(scenario, envs):
        errors = (await problem_of(await client.post(f"{API}/schedules", json=body), 400))["errors"]
        assert field in errors and words in errors[field], (body, errors)
    assert (await (await client.get(f"{API}/schedules")).json())["total"] == 0
    kept = await created(
        client,
        f"{API}/schedules",
        {"scenarioId": scenario["id"], "environmentIds": [envs[0]["id"]], "intervalSeconds": 9},
    )
    refused = await client.patch(f"{API}/schedules/{kept['id']}", json={"cron": "0 * * * *"})
    assert "exactly one" in (await problem_of(refused, 400))["errors"]["cron"]
    assert (await (await client.get(f"{API}/schedules/{kept['id']}")).json()) == kept


@pytest.mark.parametrize("query", ["orderBy=name", "scenarioId=nope", "q=x"])
async def test_a_bad_schedule_list_query_is_refused(client: Client, query: str) -> None:
    await problem_of(await client.get(f"{API}/schedules?{query}"), 400)
