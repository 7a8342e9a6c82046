"""Listing runs at scale: page 1 of a large runs table, by each allowed sort, on SQLite and PostgreSQL.

Prints milliseconds per listing (median of repeated calls through the real repository) and each sort's
ratio to a baseline measured in the same run: fetching one run by primary key. The target: page 1 by
``scenario.name``, by ``status`` and by ``createdAt`` (each direction) within 50 ms at 1,000,000 runs.

    python bench/storage.py [--runs 1000000] [--repeat 15] [--sqlite-only]
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

import sqlalchemy as sa

from scenariokit.domain.model import Environment, RunStatus, Scenario
from scenariokit.formats.queries import RunQuery
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema
from scenariokit.storage.sqlalchemy import tables as t

PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TARGET_MS = 50.0


async def seed(store: SqlStore, runs: int) -> uuid.UUID:
    """Fill the store with ``runs`` runs over 500 scenarios; return one run id."""
    env = Environment(name="bench")
    scenarios = [Scenario(name=f"scenario {i:04d} {uuid.uuid4().hex[:6]}") for i in range(500)]
    async with store.unit_of_work() as uow:
        await uow.environments.add(env)
        for scenario in scenarios:
            await uow.scenarios.add(scenario)
        await uow.commit()
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
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
                        "environment_id": env.id,
                        "save_session": False,
                        "status": rng.choice(statuses),
                        "step_results": [],
                        "artifacts": [],
                        "cancel_requested": False,
                        "created_at": start + timedelta(seconds=i),
                    }
                )
            await conn.execute(sa.insert(t.runs), rows)
    if store.dialect == "postgresql":
        # what autovacuum does to a table after a burst of writes (one transaction held 1,000,000 updates
        # of the run counts: none of their old versions could be pruned while it ran)
        async with store.engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(sa.text("VACUUM ANALYZE runs"))
            await conn.execute(sa.text("VACUUM ANALYZE run_counts"))
    else:
        async with store.engine.begin() as conn:
            await conn.execute(sa.text("ANALYZE"))
    assert first is not None
    return first


async def timed(call: Callable[[], Awaitable[object]], repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls, after one warm-up."""
    await call()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def bench_store(label: str, url: str, runs: int, repeat: int) -> bool:
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
        print(f"  {'baseline: one run by id':38s} {baseline:7.2f} ms   1.0x")
        ok = True
        for order_by in RunQuery.ORDER_BY:
            for order_dir in ("asc", "desc"):
                query = RunQuery(order_by=order_by, order_dir=order_dir)  # type: ignore[arg-type]

                async def page(query: RunQuery = query) -> object:
                    async with store.unit_of_work(readonly=True) as uow:
                        return await uow.runs.list(query)

                ms = await timed(page, repeat)
                verdict = "  (target ≤ 50 ms: " + ("met" if ms <= TARGET_MS else "MISSED") + ")"
                ok = ok and ms <= TARGET_MS
                label = f"page 1 by {order_by} {order_dir}"
                print(f"  {label:38s} {ms:7.2f} ms {ms / baseline:5.1f}x{verdict}")
        return ok
    finally:
        await store.drop_schema()
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [await bench_store("SQLite", f"sqlite:///{Path(tmp) / 'bench.db'}", args.runs, args.repeat)]
        if not args.sqlite_only:
            try:
                results.append(
                    await bench_store(
                        "PostgreSQL", f"{PG_URL}?schema={unique_schema('bench')}", args.runs, args.repeat
                    )
                )
            except OSError as exc:
                print(f"\nPostgreSQL skipped: {exc}")
    print("\nevery first page within 50 ms" if all(results) else "\nsome first page took more than 50 ms")


if __name__ == "__main__":
    asyncio.run(main())
