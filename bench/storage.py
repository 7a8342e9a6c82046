"""Listing at scale: page 1 of a large runs table, by each allowed sort and filter, of a large audit log,
by each filter, and of a large scenario list, on SQLite and PostgreSQL.

Prints milliseconds per listing (median of repeated calls through the real repository) and each
listing's ratio to a baseline measured in the same run: fetching one run by primary key. The targets,
each within 50 ms: page 1 of 1,000,000 runs by ``scenario.name``, by ``status`` and by ``createdAt``
(each direction), and filtered by environment (a common one and a rare one), by status and
environment, ``since`` a day ago, and by scenario or environment since then; page 1 of 1,000,000
audit entries newest first, oldest first, by ``resource``, by ``tokenName`` and since a day ago (every
write adds an entry, so a team's log only grows); page 1 of 100,000 scenarios of two steps, as the
library lists them (``kit.scenarios.list``) and as REST and MCP do (records), by each order. A search
by name (``q``, a substring: it reads every name) is timed beside them, without the target.

    python bench/storage.py [--runs 1000000] [--audit-entries 1000000] [--scenarios 100000]
                            [--repeat 15] [--sqlite-only]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from _stores import analyzed

from scenariokit.domain.audit import ACTIONS, entry_id
from scenariokit.domain.model import Environment, RunStatus, Scenario, Step
from scenariokit.formats.queries import AuditQuery, RunQuery, ScenarioQuery
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema
from scenariokit.storage.sqlalchemy import tables as t

PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TARGET_MS = 50.0


#: the environments runs are seeded in, with their shares: production, staging and a rare one
ENVIRONMENT_SHARES = {"production": 60, "staging": 39, "a rare one": 1}
#: when the first run was created; they come a second apart
RUNS_START = datetime(2026, 1, 1, tzinfo=UTC)


async def seed(store: SqlStore, runs: int) -> uuid.UUID:
    """Fill the store with ``runs`` runs over 500 scenarios and three environments; return one run id."""
    envs = [Environment(name=name) for name in ENVIRONMENT_SHARES]
    scenarios = [Scenario(name=f"scenario {i:04d} {uuid.uuid4().hex[:6]}") for i in range(500)]
    async with store.unit_of_work() as uow:
        for env in envs:
            await uow.environments.add(env)
        for scenario in scenarios:
            await uow.scenarios.add(scenario)
        await uow.commit()
    rng = random.Random(7)
    start = RUNS_START
    shares = list(ENVIRONMENT_SHARES.values())
    statuses = [s.value for s in RunStatus]
    first = None
    batch = 5000
    async with store.engine.begin() as conn:
        for offset in range(0, runs, batch):
            rows = []
            for i in range(offset, min(offset + batch, runs)):
                scenario = rng.choice(scenarios)
                run_id = uuid.uuid4()
                first = first or run_id
                rows.append(
                    {
                        "id": run_id,
                        "scenario_id": scenario.id,
                        "scenario_name": scenario.name,
                        "environment_id": rng.choices(envs, shares)[0].id,
                        "save_session": False,
                        "status": rng.choice(statuses),
                        "step_results": [],
                        "artifacts": [],
                        "cancel_requested": False,
                        "created_at": start + timedelta(seconds=i),
                    }
                )
            await conn.execute(sa.insert(t.runs), rows)
    # one transaction held 1,000,000 updates of the run counts: none of their old versions could be
    # pruned while it ran
    await analyzed(store, "runs", "run_counts")
    assert first is not None
    return first


#: what an audit log's entries name, in the shares a team's writes might have them
RESOURCES = ("run",) * 6 + ("scenario", "scenario", "step", "environment", "credential", "snippet")
TOKEN_NAMES = ("ci", "ci", "ci", "dashboard", "agent", None)
#: when the seeded log's last entry was written: ``since`` a day before it takes 86,400 entries
AUDIT_END = datetime(2026, 11, 30, tzinfo=UTC)


async def seed_audit(store: SqlStore, entries: int) -> None:
    """Fill the audit log with ``entries`` entries a second apart, ending at :data:`AUDIT_END`."""
    rng = random.Random(11)
    start = AUDIT_END - timedelta(seconds=entries)
    # A transaction and one statement a batch: on PostgreSQL the counts' trigger then runs once a batch,
    # and the old versions of the counts' rows it updates can be pruned between batches (a million
    # single-row INSERTs in one transaction stack a million versions of the same few rows).
    batch = 10_000 if store.dialect == "postgresql" else 1000
    for offset in range(0, entries, batch):
        async with store.engine.begin() as conn:
            rows = [
                {
                    "id": entry_id(),
                    "at": start + timedelta(seconds=i),
                    "token_name": rng.choice(TOKEN_NAMES),
                    "door": "rest",
                    "action": rng.choice(ACTIONS),
                    "resource": (resource := rng.choice(RESOURCES)),
                    "resource_id": uuid.uuid4(),
                    "summary": f"a write to a {resource} named 'checkout {i % 997}'",
                }
                for i in range(offset, min(offset + batch, entries))
            ]
            if store.dialect == "postgresql":  # COPY: one statement, the trigger once
                raw: Any = (await conn.get_raw_connection()).driver_connection
                columns = list(rows[0])
                records = [tuple(row[name] for name in columns) for row in rows]
                await raw.copy_records_to_table("audit_log", records=records, columns=columns)
            else:
                await conn.execute(sa.insert(t.audit_log), rows)
    await analyzed(store, "audit_log", "audit_counts")


async def run_filters(store: SqlStore, runs: int) -> dict[str, RunQuery]:
    """The filtered listings of runs a dashboard shows, by their labels."""
    async with store.engine.connect() as conn:
        rows = await conn.execute(sa.select(t.environments.c.name, t.environments.c.id))
        envs = {name: ident for name, ident in rows}
        scenario = (await conn.execute(sa.select(t.scenarios.c.id).limit(1))).scalar_one()
    production, rare = envs["production"], envs["a rare one"]
    day_ago = RUNS_START + timedelta(seconds=runs) - timedelta(days=1)
    return {
        "runs in an environment (60%)": RunQuery(environment_id=production),
        "runs in an environment (1%)": RunQuery(environment_id=rare),
        "failed runs in an environment": RunQuery(status=RunStatus.FAIL, environment_id=production),
        "runs since a day ago": RunQuery(since=day_ago),
        "a scenario's runs since then": RunQuery(scenario_id=scenario, since=day_ago),
        "an environment's runs since": RunQuery(environment_id=production, since=day_ago),
    }


async def timed_page(
    store: SqlStore, label: str, query: RunQuery | AuditQuery, repeat: int, baseline: float
) -> bool:
    """Print the median time of the page ``query`` lists, against :data:`TARGET_MS`; whether it is met."""

    async def page() -> object:
        async with store.unit_of_work(readonly=True) as uow:
            if isinstance(query, AuditQuery):
                return await uow.audit.list(query)
            return await uow.runs.list(query)

    return reported(label, await timed(page, repeat), baseline)


def reported(label: str, ms: float, baseline: float, *, target: bool = True) -> bool:
    """Print a page's median time and its ratio to the baseline, with its verdict against
    :data:`TARGET_MS` (``target``) or as a search with none; whether it is within the target."""
    met = ms <= TARGET_MS
    verdict = "  (a search: no target)"
    if target:
        verdict = "  (target ≤ 50 ms: " + ("met" if met else "MISSED") + ")"
    print(f"  {label:40s} {ms:7.2f} ms {ms / baseline:5.1f}x{verdict}")
    return met or not target


async def timed(call: Callable[[], Awaitable[object]], repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls, after one warm-up."""
    await call()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def bench_audit(store: SqlStore, entries: int, repeat: int, baseline: float) -> bool:
    """Page 1 of the audit log by each filter, against :data:`TARGET_MS`."""
    began = time.perf_counter()
    await seed_audit(store, entries)
    print(f"  seeded {entries:,} audit entries in {time.perf_counter() - began:.1f} s")
    day_ago = AUDIT_END - timedelta(days=1)
    queries = {
        "audit newest first": AuditQuery(),
        "audit oldest first": AuditQuery(order_dir="asc"),
        "audit resource=credential": AuditQuery(resource="credential"),
        "audit tokenName=agent": AuditQuery(token_name="agent"),
        "audit resource and tokenName": AuditQuery(resource="snippet", token_name="dashboard"),
        "audit since a day ago": AuditQuery(since=day_ago),
    }
    results = [
        await timed_page(store, f"page 1, {label}", query, repeat, baseline)
        for label, query in queries.items()
    ]
    return all(results)


async def seed_scenarios(store: SqlStore, count: int) -> None:
    """Add ``count`` scenarios of two steps, through the repository, 5,000 to a unit of work."""
    for offset in range(0, count, 5000):
        async with store.unit_of_work() as uow:
            for i in range(offset, min(offset + 5000, count)):
                steps = (Step(exec_code="await page.goto(helpers.getEnvUrl())"), Step(exec_code=f"n = {i}"))
                await uow.scenarios.add(Scenario(name=f"checkout {i:06d}", steps=steps))
            await uow.commit()
    await analyzed(store, "scenarios", "steps")


async def bench_scenarios(store: SqlStore, count: int, repeat: int, baseline: float) -> bool:
    """Page 1 of the scenarios by each order, as the library and as REST list them; a search beside."""
    began = time.perf_counter()
    await seed_scenarios(store, count)
    print(f"  seeded {count:,} scenarios in {time.perf_counter() - began:.1f} s")
    ok = True
    for order_by in ScenarioQuery.ORDER_BY:
        for order_dir in ("asc", "desc"):
            query = ScenarioQuery(order_by=order_by, order_dir=order_dir)
            for way in ("library", "REST"):
                ok = await timed_scenarios(store, f"scenarios ({way}) by {order_by} {order_dir}", way, query,
                                           repeat, baseline) and ok  # fmt: skip
    searched = ScenarioQuery(q="checkout 0000")  # one name in a hundred (of 100,000: 1,000)
    for way in ("library", "REST"):
        await timed_scenarios(store, f"scenarios ({way}) named like 1%", way, searched, repeat, baseline,
                              target=False)  # fmt: skip
    return ok


async def timed_scenarios(
    store: SqlStore, label: str, way: str, query: ScenarioQuery, repeat: int, baseline: float, *,
    target: bool = True,
) -> bool:  # fmt: skip
    """Print the median time of a page of scenarios, read the ``way`` it is; whether within the target."""

    async def page() -> object:
        async with store.unit_of_work(readonly=True) as uow:
            if way == "REST":
                return await uow.scenarios.list_records(query)
            return await uow.scenarios.list(query)

    return reported(f"page 1, {label}", await timed(page, repeat), baseline, target=target)


async def bench_store(
    label: str, url: str, runs: int, repeat: int, audit_entries: int, scenarios: int
) -> bool:
    store = await open_store(url, secret_key="bench")
    assert isinstance(store, SqlStore)
    try:
        began = time.perf_counter()
        run_id = await seed(store, runs)
        print(f"\n{label}: seeded {runs:,} runs in {time.perf_counter() - began:.1f} s")

        async def by_id() -> object:
            async with store.unit_of_work(readonly=True) as uow:
                return await uow.runs.get(run_id)

        baseline = await timed(by_id, repeat)
        print(f"  {'baseline: one run by id':40s} {baseline:7.2f} ms   1.0x")
        results = [
            await timed_page(
                store,
                f"page 1 by {order_by} {order_dir}",
                RunQuery(order_by=order_by, order_dir=order_dir),
                repeat,
                baseline,
            )
            for order_by in RunQuery.ORDER_BY
            for order_dir in ("asc", "desc")
        ]
        for label, query in (await run_filters(store, runs)).items():
            results.append(await timed_page(store, f"page 1, {label}", query, repeat, baseline))
        ok = all(results)
        if audit_entries:
            ok = await bench_audit(store, audit_entries, repeat, baseline) and ok
        if scenarios:
            ok = await bench_scenarios(store, scenarios, repeat, baseline) and ok
        return ok
    finally:
        await store.drop_schema()
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--audit-entries", type=int, default=1_000_000, help="0 leaves the audit log out")
    parser.add_argument("--scenarios", type=int, default=100_000, help="0 leaves the scenarios out")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        sizes = (args.runs, args.repeat, args.audit_entries, args.scenarios)
        results = [await bench_store("SQLite", sqlite_url, *sizes)]
        if not args.sqlite_only:
            try:
                results.append(
                    await bench_store("PostgreSQL", f"{PG_URL}?schema={unique_schema('bench')}", *sizes)
                )
            except OSError as exc:
                print(f"\nPostgreSQL skipped: {exc}")
    print("\nevery first page within 50 ms" if all(results) else "\nsome first page took more than 50 ms")


if __name__ == "__main__":
    asyncio.run(main())
