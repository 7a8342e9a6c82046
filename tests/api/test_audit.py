"""The audit log (docs/deployment.md, "Audit log"): every write through every door is recorded in the
store with the token's name, in the write's own transaction, never holding a secret; admins read it
at ``GET /api/v1/audit``, paged and filtered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from api_support import API, Client, ClientFactory, problem_of

from scenariokit.formats.inputs import EnvironmentInput
from scenariokit.formats.queries import AuditQuery

ADMIN = "admin-token-0123456789ab"
WRITER = "writer-token-0123456789"
READER = "reader-token-0123456789"
TOKENS = (f"ops:admin:{ADMIN}", f"agent:write:{WRITER}", f"dash:read:{READER}")
SECRET = "hunter2-never-in-the-audit-log"
ENV_SECRET = "env-secret-never-in-the-audit-log"

both_databases = pytest.mark.parametrize("api_store", ["sqlite", "postgresql"], indirect=True)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def team(make_client: ClientFactory) -> Client:
    return await make_client(api_tokens=TOKENS)


async def _post(client: Client, path: str, body: dict[str, Any], token: str = ADMIN) -> dict[str, Any]:
    response = await client.post(path, json=body, headers=bearer(token))
    assert response.status == 201, await response.text()
    return dict(await response.json())


async def _audit(client: Client, query: str = "") -> dict[str, Any]:
    response = await client.get(f"{API}/audit{query}", headers=bearer(ADMIN))
    assert response.status == 200, await response.text()
    return dict(await response.json())


@both_databases
async def test_every_rest_write_is_recorded_with_its_token_and_never_a_secret(
    team: Client, services: Any
) -> None:
    credential = await _post(
        team, f"{API}/credentials", {"name": "shop login", "username": "u", "secret": SECRET}
    )
    env = await _post(
        team, f"{API}/environments", {"name": "staging", "data": {"url": "http://x", "apiKey": ENV_SECRET}}
    )
    scenario = await _post(
        team,
        f"{API}/scenarios",
        {"name": "checkout", "environmentId": env["id"], "steps": [{"title": "a", "execCode": "pass"}],
         "credentials": [{"credentialId": credential["id"], "alias": "shop"}]},
        token=WRITER,
    )  # fmt: skip
    patched = await team.patch(
        f"{API}/credentials/{credential['id']}", json={"secret": SECRET + "-2"}, headers=bearer(ADMIN)
    )
    assert patched.status == 200
    await _post(team, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": env["id"]}, token=WRITER)
    deleted = await team.delete(f"{API}/scenarios/{scenario['id']}/steps/{scenario['steps'][0]['id']}",
                                headers=bearer(WRITER))  # fmt: skip
    assert deleted.status == 204

    page = await _audit(team)
    seen = [(e["tokenName"], e["door"], e["action"], e["resource"]) for e in reversed(page["items"])]
    assert seen == [
        ("ops", "rest", "create", "credential"),
        ("ops", "rest", "create", "environment"),
        ("agent", "rest", "create", "scenario"),
        ("ops", "rest", "update", "credential"),
        ("agent", "rest", "run", "run"),
        ("agent", "rest", "delete", "step"),
    ]
    assert page["total"] == 6 and page["page"] == 1 and page["limit"] == 20
    entry = page["items"][-1]
    assert set(entry) == {"id", "at", "tokenName", "door", "action", "resource", "resourceId", "summary"}
    assert entry["resourceId"] == credential["id"] and entry["summary"] == "created credential 'shop login'"

    # nothing of a secret anywhere in what the store holds for the log, nor in its export to admins
    stored = await services.typed.audit.list(AuditQuery(limit=200))
    text = repr(stored) + repr(page)
    assert SECRET not in text and ENV_SECRET not in text and "hunter2" not in text


async def test_the_log_is_paged_and_filtered(team: Client) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    for i in range(3):
        await _post(team, f"{API}/snippets", {"alias": f"s{i}", "title": "t", "code": "pass"}, token=WRITER)
    await _post(team, f"{API}/environments", {"name": "e", "data": {}})
    assert (await _audit(team, "?resource=snippet"))["total"] == 3
    assert (await _audit(team, "?tokenName=agent&limit=2"))["items"].__len__() == 2
    assert (await _audit(team, "?tokenName=ops"))["total"] == 1
    assert (await _audit(team, "?tokenName=nobody"))["total"] == 0
    since = before.isoformat().replace("+00:00", "Z")
    assert (await _audit(team, f"?since={since}"))["total"] == 4
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert (await _audit(team, f"?since={later.replace('+', '%2B')}"))["total"] == 0
    oldest_first = await _audit(team, "?orderDir=asc&limit=1&page=2")
    assert oldest_first["items"][0]["summary"] == "created snippet 's1'"


@pytest.mark.parametrize(
    ("query", "field"),
    [("?since=yesterday", "since"), ("?limit=0", "limit"), ("?orderBy=name", "orderBy"), ("?q=x", "q"),
     ("?resource=", "resource")],
)  # fmt: skip
async def test_bad_audit_queries_are_refused_naming_the_parameter(
    team: Client, query: str, field: str
) -> None:
    problem = await problem_of(await team.get(f"{API}/audit{query}", headers=bearer(ADMIN)), 400)
    assert field in problem["errors"]


async def test_only_admin_reads_the_log(team: Client) -> None:
    for token in (READER, WRITER):
        problem = await problem_of(await team.get(f"{API}/audit", headers=bearer(token)), 403)
        assert "scope 'admin'" in problem["detail"]


async def test_a_refused_write_records_nothing(team: Client) -> None:
    await problem_of(await team.post(f"{API}/scenarios", json={"name": ""}, headers=bearer(WRITER)), 400)
    await problem_of(await team.post(f"{API}/credentials", json={"name": "c"}, headers=bearer(WRITER)), 403)
    assert (await _audit(team))["total"] == 0


YAML_STREAM = f"""\
# credentials
kind: credential
name: smuggled
username: u
secret: {SECRET}
---
# scenarios
kind: scenario
name: imported
steps:
  - title: one
    execCode: pass
"""


async def test_imports_are_recorded_per_record_and_a_credential_needs_admin(team: Client) -> None:
    headers = {"Content-Type": "application/yaml"}
    refused = await team.post(
        f"{API}/scenarios/import", data=YAML_STREAM, headers={**headers, **bearer(WRITER)}
    )
    assert "scope 'admin'" in (await problem_of(refused, 403))["detail"]
    assert (await _audit(team))["total"] == 0
    listed = await (await team.get(f"{API}/credentials", headers=bearer(ADMIN))).json()
    assert listed["total"] == 0

    done = await team.post(f"{API}/scenarios/import", data=YAML_STREAM, headers={**headers, **bearer(ADMIN)})
    assert done.status == 200, await done.text()
    page = await _audit(team)
    assert sorted((e["action"], e["resource"], e["summary"]) for e in page["items"]) == [
        ("import", "credential", "created credential 'smuggled' by import"),
        ("import", "scenario", "created scenario 'imported' by import"),
    ]
    assert SECRET not in repr(page)


async def test_library_and_schedule_writes_are_recorded_with_their_door(team: Client, services: Any) -> None:
    env = await services.typed.environments.create(EnvironmentInput(name="from the library", data={}))
    scenario = await _post(team, f"{API}/scenarios", {"name": "nightly"})
    await _post(
        team,
        f"{API}/schedules",
        {"scenarioId": scenario["id"], "environmentIds": [str(env.id)], "intervalSeconds": 60},
    )
    fires = await services.typed.schedules.fire_due(datetime.now(UTC) + timedelta(minutes=2))
    assert len(fires) == 1 and len(fires[0].run_ids) == 1
    page = await _audit(team)
    seen = [(e["tokenName"], e["door"], e["action"], e["resource"]) for e in reversed(page["items"])]
    assert seen == [
        (None, "library", "create", "environment"),
        ("ops", "rest", "create", "scenario"),
        ("ops", "rest", "create", "schedule"),
        (None, "schedule", "fire", "schedule"),
    ]
    assert page["items"][0]["summary"] == "queued 1 run(s)"


@both_databases
@pytest.mark.parametrize(
    ("since", "found"),
    [("0001-01-01T00:00:00%2B01:00", 1), ("9999-12-31T23:59:59-01:00", 0), ("2000-01-01t23:59:60z", 1),
     ("2000-01-01T00:00:00", 1), ("2000-01-01T00:00:00.123456789%2B05:30", 1)],
)  # fmt: skip
async def test_since_takes_any_rfc_3339_time_on_both_databases(team: Client, since: str, found: int) -> None:
    await _post(team, f"{API}/environments", {"name": "e", "data": {}})
    assert (await _audit(team, f"?since={since}"))["total"] == found
