"""``GET /api/v1/scenarios/{id}/stats?days=N``: figures of seeded runs, exact, on both databases."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from api_support import API, Client, both_backends, created, problem_of

from scenariokit.domain.model import Run, RunError, RunErrorKind, RunStatus, utcnow


def _run(scenario: dict[str, Any], env: dict[str, Any], **fields: Any) -> Run:
    return Run(
        scenario_id=uuid.UUID(scenario["id"]),
        scenario_name=scenario["name"],
        environment_id=uuid.UUID(env["id"]),
        **fields,
    )


async def _seed(services: Any, runs: list[Run]) -> None:
    async with services.store.unit_of_work() as uow:
        for run in runs:
            await uow.runs.add(run)
        await uow.commit()


@both_backends
async def test_stats_are_exact_on_seeded_runs(client: Client, services: Any) -> None:
    env = await created(client, f"{API}/environments", {"name": "e", "data": {"url": "http://x"}})
    scenario = await created(client, f"{API}/scenarios", {"name": "checkout"})
    other = await created(client, f"{API}/scenarios", {"name": "other"})
    now = utcnow()
    seeded = []
    for i in range(10):  # durations 100 … 1000 ms; runs 7, 8, 9 fail; runs 1 and 2 passed flaky
        created_at = now - timedelta(hours=20 - i)
        failed = i >= 7
        seeded.append(
            _run(
                scenario,
                env,
                status=RunStatus.FAIL if failed else RunStatus.PASS,
                error=RunError(kind=RunErrorKind.ASSERTION, message=f"boom {i}") if failed else None,
                flaky=i in (1, 2),
                created_at=created_at,
                started_at=created_at,
                finished_at=created_at + timedelta(milliseconds=100 * (i + 1)),
            )
        )
    old = now - timedelta(days=8)
    seeded.append(_run(scenario, env, status=RunStatus.FAIL, created_at=old, started_at=old, finished_at=old))
    seeded.append(_run(scenario, env, created_at=now - timedelta(hours=1)))  # still in progress
    seeded.append(_run(other, env, status=RunStatus.FAIL, created_at=now, started_at=now, finished_at=now))
    await _seed(services, seeded)

    stats = await (await client.get(f"{API}/scenarios/{scenario['id']}/stats", params={"days": "7"})).json()

    last = seeded[9]
    assert stats == {
        "runs": 10,
        "passed": 7,
        "failed": 3,
        "flaky": 2,
        "passRate": 0.7,
        "flakyRate": 0.2,
        "durationMs": {"p50": 500, "p95": 1000},
        "lastFailure": {
            "runId": str(last.id),
            "at": last.finished_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "message": "boom 9",
        },
        "lastPass": {
            "runId": str(seeded[6].id),
            "at": seeded[6].finished_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "revision": None,
        },
        "changedSinceLastPass": False,
    }
    wider = await (await client.get(f"{API}/scenarios/{scenario['id']}/stats", params={"days": "9"})).json()
    assert (wider["runs"], wider["failed"]) == (11, 4)
    narrow = await (await client.get(f"{API}/scenarios/{scenario['id']}/stats?days=1")).json()
    assert narrow["runs"] == 10  # all ten within the last day; the default window (30 days) has 11
    assert (await (await client.get(f"{API}/scenarios/{scenario['id']}/stats")).json())["runs"] == 11


@both_backends
async def test_a_scenario_without_runs_has_empty_figures(client: Client) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "new"})
    stats = await (await client.get(f"{API}/scenarios/{scenario['id']}/stats")).json()
    assert stats == {
        "runs": 0,
        "passed": 0,
        "failed": 0,
        "flaky": 0,
        "passRate": None,
        "flakyRate": None,
        "durationMs": {"p50": None, "p95": None},
        "lastFailure": None,
        "lastPass": None,
        "changedSinceLastPass": False,
    }


@pytest.mark.parametrize(
    ("query", "field"),
    [("days=0", "days"), ("days=367", "days"), ("days=abc", "days"), ("days=", "days"), ("weeks=2", "weeks")],
)
async def test_a_bad_window_is_refused_naming_the_parameter(client: Client, query: str, field: str) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "x"})
    refused = await problem_of(await client.get(f"{API}/scenarios/{scenario['id']}/stats?{query}"), 400)
    assert field in refused["errors"]


async def test_stats_of_a_missing_scenario_are_404(client: Client) -> None:
    await problem_of(await client.get(f"{API}/scenarios/{uuid.uuid4()}/stats"), 404)
