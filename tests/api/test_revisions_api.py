"""``/api/v1/scenarios/{id}/revisions``: list, read, diff and restore over REST, on both databases."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from api_support import API, Client, both_backends, created, problem_of

from scenariokit.domain.model import Run, RunStatus, utcnow


async def _json(response: Any, status: int = 200) -> Any:
    assert response.status == status, await response.text()
    return await response.json()


@both_backends
async def test_each_rest_write_makes_a_revision_that_reads_diffs_and_restores(client: Client) -> None:
    scenario = await created(
        client,
        f"{API}/scenarios?message=first%20cut",
        {
            "name": "checkout",
            "steps": [{"execCode": "await page.goto('/')"}, {"execCode": "x = 1"}, {"execCode": "z = 0"}],
        },
    )
    sid = scenario["id"]
    assert scenario["revision"] == 1
    first, second, third = scenario["steps"]
    patched = await _json(await client.patch(f"{API}/scenarios/{sid}", json={"description": "d"}))
    assert patched["revision"] == 2
    same = await _json(await client.patch(f"{API}/scenarios/{sid}", json={"description": "d"}))
    assert same["revision"] == 2  # nothing changed: no revision
    await _json(
        await client.patch(
            f"{API}/scenarios/{sid}/steps/{second['id']}",
            params={"message": "count to two"},
            json={"execCode": "x = 2\ny = 3"},
        )
    )
    await _json(
        await client.put(
            f"{API}/scenarios/{sid}/steps/order", json={"stepIds": [third["id"], first["id"], second["id"]]}
        )
    )
    listed = await _json(await client.get(f"{API}/scenarios"))
    assert listed["items"][0]["revision"] == 4
    assert (await _json(await client.get(f"{API}/scenarios/{sid}")))["revision"] == 4

    page = await _json(await client.get(f"{API}/scenarios/{sid}/revisions", params={"limit": "2"}))
    assert (page["total"], page["page"], page["limit"]) == (4, 1, 2)
    assert [(item["number"], item["source"], item["message"]) for item in page["items"]] == [
        (4, "rest", None),
        (3, "rest", "count to two"),
    ]
    assert set(page["items"][0]) == {"number", "createdAt", "source", "tokenName", "message", "contentHash"}
    one = await _json(await client.get(f"{API}/scenarios/{sid}/revisions/1"))
    assert one["message"] == "first cut" and one["tokenName"] is None
    assert one["scenario"]["name"] == "checkout"
    assert [step["execCode"] for step in one["scenario"]["steps"]] == [
        "await page.goto('/')",
        "x = 1",
        "z = 0",
    ]

    diff = await _json(await client.get(f"{API}/scenarios/{sid}/revisions/2/diff/4"))
    assert (diff["from"], diff["to"], diff["fields"]) == (2, 4, {})
    assert [s["stepId"] for s in diff["steps"]] == [third["id"], second["id"]]  # the first only shifted
    moved, edited = diff["steps"]
    assert (moved["change"], moved["moved"], moved["order"], moved["fromOrder"]) == ("changed", True, 1, 3)
    assert "-order: 3\n+order: 1\n" in moved["diff"] and "execCode" in moved["diff"]
    assert edited["change"] == "changed" and not edited["moved"]
    assert "-  x = 1\n+  x = 2\n+  y = 3\n" in edited["diff"] and "order" not in edited["diff"]
    assert edited["diff"].startswith("--- revision 2 step 2\n+++ revision 4 step 3\n")
    fields = await _json(await client.get(f"{API}/scenarios/{sid}/revisions/1/diff/2"))
    assert fields["fields"] == {"description": [None, "d"]} and fields["steps"] == []

    restored = await _json(await client.post(f"{API}/scenarios/{sid}/revisions/1/restore?message=undo"))
    assert restored["revision"] == 5
    assert [s["execCode"] for s in restored["steps"]] == ["await page.goto('/')", "x = 1", "z = 0"]
    newest = (await _json(await client.get(f"{API}/scenarios/{sid}/revisions")))["items"][0]
    assert (newest["number"], newest["source"], newest["message"]) == (5, "restore", "undo")
    assert newest["contentHash"] == one["contentHash"]
    back = await _json(await client.get(f"{API}/scenarios/{sid}/revisions/5/diff/1"))
    assert back["fields"] == {} and back["steps"] == []


@both_backends
async def test_two_concurrent_rest_patches_make_two_revisions(client: Client) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout"})
    sid = scenario["id"]
    answers = await asyncio.gather(
        client.patch(f"{API}/scenarios/{sid}", json={"description": "a"}),
        client.patch(f"{API}/scenarios/{sid}", json={"timeoutSeconds": 60}),
    )
    numbers = sorted([(await _json(answer))["revision"] for answer in answers])
    assert numbers == [2, 3]
    stored = await _json(await client.get(f"{API}/scenarios/{sid}"))
    assert (stored["description"], stored["timeoutSeconds"], stored["revision"]) == ("a", 60.0, 3)


@pytest.mark.parametrize("number", ["0", "-1", "abc", "1.5", "01x", "99999999999", "%C2%B2"])
async def test_a_revision_number_that_is_not_a_positive_whole_number_is_400(
    client: Client, number: str
) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout"})
    sid = scenario["id"]
    for method, path, field in (
        ("GET", f"{API}/scenarios/{sid}/revisions/{number}", "number"),
        ("GET", f"{API}/scenarios/{sid}/revisions/{number}/diff/1", "from"),
        ("GET", f"{API}/scenarios/{sid}/revisions/1/diff/{number}", "to"),
        ("POST", f"{API}/scenarios/{sid}/revisions/{number}/restore", "number"),
    ):
        problem = await problem_of(await client.request(method, path), 400)
        assert field in problem["errors"], (path, problem)
    assert (await _json(await client.get(f"{API}/scenarios/{sid}")))["revision"] == 1


async def test_unknown_revisions_and_scenarios_are_404_and_bad_ids_400(client: Client) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout"})
    sid, other = scenario["id"], str(uuid.uuid4())
    for method, path in (
        ("GET", f"{API}/scenarios/{sid}/revisions/2"),
        ("GET", f"{API}/scenarios/{sid}/revisions/1/diff/2"),
        ("POST", f"{API}/scenarios/{sid}/revisions/9/restore"),
        ("GET", f"{API}/scenarios/{other}/revisions"),
        ("GET", f"{API}/scenarios/{other}/revisions/1"),
    ):
        await problem_of(await client.request(method, path), 404)
    await problem_of(await client.get(f"{API}/scenarios/not-a-uuid/revisions"), 400)
    problem = await problem_of(await client.get(f"{API}/scenarios/{sid}/revisions?orderBy=name"), 400)
    assert "orderBy" in problem["errors"]
    problem = await problem_of(await client.get(f"{API}/scenarios/{sid}/revisions?q=x"), 400)
    assert "q" in problem["errors"]


async def test_restoring_onto_a_deleted_scenario_is_404(client: Client) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout"})
    sid = scenario["id"]
    assert (await client.delete(f"{API}/scenarios/{sid}")).status == 204
    await problem_of(await client.post(f"{API}/scenarios/{sid}/revisions/1/restore"), 404)
    await problem_of(await client.get(f"{API}/scenarios/{sid}/revisions"), 404)


async def test_a_bad_message_is_refused_and_changes_nothing(client: Client) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout"})
    sid = scenario["id"]
    problem = await problem_of(
        await client.patch(f"{API}/scenarios/{sid}", params={"message": "m" * 1001}, json={"name": "x"}), 400
    )
    assert "message" in problem["errors"]
    problem = await problem_of(
        await client.patch(f"{API}/scenarios/{sid}?message=a%00b", json={"name": "x"}), 400
    )
    assert "message" in problem["errors"]
    stored = await _json(await client.get(f"{API}/scenarios/{sid}"))
    assert (stored["name"], stored["revision"]) == ("checkout", 1)


async def test_restore_of_a_revision_naming_a_deleted_environment_is_409(client: Client) -> None:
    env = await created(client, f"{API}/environments", {"name": "e", "data": {"url": "http://x"}})
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout", "environmentId": env["id"]})
    sid = scenario["id"]
    await _json(await client.patch(f"{API}/scenarios/{sid}", json={"environmentId": None}))
    assert (await client.delete(f"{API}/environments/{env['id']}")).status == 204
    problem = await problem_of(await client.post(f"{API}/scenarios/{sid}/revisions/1/restore"), 409)
    assert env["id"] in problem["detail"]
    assert (await _json(await client.get(f"{API}/scenarios/{sid}")))["revision"] == 2


@both_backends
async def test_stats_name_the_last_pass_and_whether_the_scenario_changed_since(
    client: Client, services: Any
) -> None:
    env = await created(client, f"{API}/environments", {"name": "e", "data": {"url": "http://x"}})
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout"})
    sid = uuid.UUID(scenario["id"])
    now = utcnow()
    passed = Run(
        scenario_id=sid,
        scenario_name="checkout",
        environment_id=uuid.UUID(env["id"]),
        scenario_revision=1,
        status=RunStatus.PASS,
        created_at=now - timedelta(minutes=5),
        started_at=now - timedelta(minutes=5),
        finished_at=now - timedelta(minutes=4),
    )
    async with services.store.unit_of_work() as uow:
        await uow.runs.add(passed)
        await uow.commit()
    stats = await _json(await client.get(f"{API}/scenarios/{sid}/stats"))
    assert stats["lastPass"]["runId"] == str(passed.id) and stats["lastPass"]["revision"] == 1
    assert stats["changedSinceLastPass"] is False
    await _json(await client.patch(f"{API}/scenarios/{sid}", json={"name": "checkout 2"}))
    stats = await _json(await client.get(f"{API}/scenarios/{sid}/stats"))
    assert stats["changedSinceLastPass"] is True

    queued = await _json(
        await client.post(f"{API}/run", json={"scenarioId": str(sid), "environmentId": env["id"]}), 201
    )
    assert queued["scenarioRevision"] == 2
    runs = await _json(await client.get(f"{API}/run"))
    assert [item["scenarioRevision"] for item in runs["items"]] == [2, 1]


async def test_a_failed_runs_page_shows_what_changed_since_the_last_pass(
    client: Client, services: Any
) -> None:
    env = await created(client, f"{API}/environments", {"name": "e", "data": {"url": "http://x"}})
    scenario = await created(
        client, f"{API}/scenarios", {"name": "checkout", "steps": [{"title": "buy", "execCode": "x = 1"}]}
    )
    sid, step = uuid.UUID(scenario["id"]), scenario["steps"][0]
    now = utcnow()

    def run(revision: int, status: RunStatus, minutes: int) -> Run:
        at = now - timedelta(minutes=minutes)
        return Run(
            scenario_id=sid,
            scenario_name="checkout",
            environment_id=uuid.UUID(env["id"]),
            scenario_revision=revision,
            status=status,
            created_at=at,
            started_at=at,
            finished_at=at + timedelta(seconds=1),
        )

    passed, failed_same = run(1, RunStatus.PASS, 30), run(1, RunStatus.FAIL, 20)
    failed = run(2, RunStatus.FAIL, 10)
    async with services.store.unit_of_work() as uow:
        for item in (passed, failed_same, failed):
            await uow.runs.add(item)
        await uow.commit()
    await _json(
        await client.patch(f"{API}/scenarios/{sid}/steps/{step['id']}", json={"execCode": "x = 2  # <b>"})
    )

    page = await client.get(f"/report/runs/{failed.id}")
    html = await page.text()
    assert page.status == 200
    assert 'id="revision">2<' in html and 'id="changes"' in html
    assert "Changed since it last passed (revision 1)" in html
    assert f'href="/report/runs/{passed.id}"' in html
    assert '<span class="del">-  x = 1</span>' in html
    assert '<span class="add">+  x = 2  # &lt;b&gt;</span>' in html  # escaped, as every value
    same = await (await client.get(f"/report/runs/{failed_same.id}")).text()
    assert "Unchanged since it last passed" in same
    ok = await (await client.get(f"/report/runs/{passed.id}")).text()
    assert 'id="changes"' not in ok

    index = await (await client.get("/report/")).text()
    assert index.count("changed since pass 1") == 1
