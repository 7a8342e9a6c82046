"""Scenario revisions at scale: the bytes each revision costs, and listing and diffing at many revisions.

A scenario of 20 steps is edited ``--revisions`` times through the service (each edit changes one
step's code, as an author does), on SQLite and PostgreSQL. Printed: the bytes stored per revision
(physical table and index size where the database tells it, and the payload), against a baseline of
the same bytes had each revision kept a whole copy of the scenario; then the median milliseconds of a
page of revisions, one revision read whole, and two diffs (neighbours, and the first against the
last), each against a baseline measured in the same run: reading the scenario itself. Target: a page
and a diff each under 50 ms at 10,000 revisions.

    python bench/revisions.py [--revisions 10000] [--steps 20] [--repeat 15] [--sqlite-only]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import sqlalchemy as sa
from _stores import analyzed

from scenariokit.domain.revisions import content_of, fields_document, step_document
from scenariokit.formats.inputs import ScenarioInput, StepInput
from scenariokit.formats.queries import RevisionQuery
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema
from scenariokit.storage.sqlalchemy import tables as t
from scenariokit.storage.sqlalchemy.rows import write_json

PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TARGET_MS = 50.0


def step_code(step: int, edit: int) -> str:
    """Step code of a realistic size (about 200 bytes), different for each edit."""
    return (
        f"await page.goto(helpers.getEnvUrl() + '/shop/{step}')\n"
        f"await page.get_by_role('button', name='Add item {step}').click()\n"
        f"await expect(page.locator('#cart-count')).to_have_text('{edit % 97}')\n"
        f"log('step {step}, edit {edit}')\n"
    )


async def timed(call: Callable[[], Awaitable[object]], repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls, after one warm-up."""
    await call()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def stored_bytes(store: SqlStore) -> tuple[int | None, int]:
    """(physical bytes of the revision tables with their indexes, or None; payload bytes)."""
    physical = None
    async with store.engine.connect() as conn:
        if store.dialect == "postgresql":
            physical = int(
                (
                    await conn.execute(
                        sa.text(
                            "SELECT pg_total_relation_size('scenario_revisions') "
                            "+ pg_total_relation_size('revision_steps') "
                            "+ pg_total_relation_size('revision_fields')"
                        )
                    )
                ).scalar_one()
            )
        else:
            try:
                physical = int(
                    (
                        await conn.execute(
                            sa.text(
                                "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'revision_%' "
                                "OR name LIKE '%revision_fields%' OR name LIKE '%revision_steps%' "
                                "OR name LIKE '%scenario_revisions%'"
                            )
                        )
                    ).scalar_one()
                    or 0
                )
            except sa.exc.OperationalError:  # SQLite built without the dbstat table
                physical = None
        revisions = await conn.execute(sa.select(t.scenario_revisions))
        payload = sum(len(write_json(row.steps)) + 64 + 16 + 8 + len(row.source) + 16 for row in revisions)
        documents = await conn.execute(sa.select(t.revision_fields))
        payload += sum(len(write_json(row.fields)) + 64 + 16 + 8 for row in documents)
        bodies = await conn.execute(sa.select(t.revision_steps))
        payload += sum(
            len((row.exec_code or "").encode()) + len((row.title or "").encode()) + 64 + 16 + 16 + 8
            for row in bodies
        )
    return physical, payload


async def bench_store(label: str, url: str, revisions: int, steps: int, repeat: int) -> bool:
    store = await open_store(url, secret_key="bench")
    assert isinstance(store, SqlStore)
    services = Services(store)
    try:
        scenario = await services.scenarios.create(
            ScenarioInput(
                name="checkout",
                steps=tuple(StepInput(exec_code=step_code(i, 0), title=f"step {i}") for i in range(steps)),
            )
        )
        began = time.perf_counter()
        for edit in range(1, revisions):
            step = scenario.steps[edit % steps]
            await services.scenarios.replace_step(
                scenario.id, step.id, StepInput(exec_code=step_code(edit % steps, edit), title=step.title)
            )
        seeded = time.perf_counter() - began
        print(
            f"\n{label}: {revisions:,} revisions of {steps} steps, one step edited each "
            f"({seeded:.1f} s, {seeded / max(revisions - 1, 1) * 1000:.1f} ms an edit)"
        )
        await analyzed(store, "scenario_revisions", "revision_steps")

        current = await services.scenarios.get(scenario.id)
        content = content_of(current)
        whole_copy = len(write_json(fields_document(content))) + sum(
            len(write_json(step_document(step))) for step in content.steps
        )
        step_bytes = sum(len(write_json(step_document(step))) for step in content.steps) / steps
        physical, payload = await stored_bytes(store)
        print(f"  {'baseline: a whole copy per revision':40s} {whole_copy:9,.0f} bytes/revision   1.00x")
        print(f"  {'one step body':40s} {step_bytes:9,.0f} bytes")
        print(
            f"  {'payload stored':40s} {payload / revisions:9,.0f} bytes/revision "
            f"{payload / revisions / whole_copy:6.2f}x"
        )
        if physical is not None:
            print(
                f"  {'tables and indexes':40s} {physical / revisions:9,.0f} bytes/revision "
                f"{physical / revisions / whole_copy:6.2f}x"
            )

        async def read_scenario() -> object:
            return await services.scenarios.get(scenario.id)

        baseline = await timed(read_scenario, repeat)
        print(f"  {'baseline: read the scenario':40s} {baseline:9.2f} ms            1.0x")
        last = current.revision
        calls: list[tuple[str, Callable[[], Awaitable[object]], bool]] = [
            ("page 1 of revisions (20)", lambda: services.revisions.list(scenario.id), True),
            (
                "a middle page of revisions (20)",
                lambda: services.revisions.list(scenario.id, RevisionQuery(page=max(1, last // 40))),
                True,
            ),
            ("one revision, whole", lambda: services.revisions.get(scenario.id, last // 2), False),
            ("diff of neighbours", lambda: services.revisions.diff(scenario.id, last - 1, last), True),
            ("diff of the first and the last", lambda: services.revisions.diff(scenario.id, 1, last), True),
        ]
        ok = True
        for name, call, targeted in calls:
            ms = await timed(call, repeat)
            verdict = ""
            if targeted:
                verdict = "  (target ≤ 50 ms: " + ("met" if ms <= TARGET_MS else "MISSED") + ")"
                ok = ok and ms <= TARGET_MS
            print(f"  {name:40s} {ms:9.2f} ms {ms / baseline:9.1f}x{verdict}")
        return ok
    finally:
        await store.drop_schema()
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revisions", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        results = [await bench_store("SQLite", sqlite_url, args.revisions, args.steps, args.repeat)]
        if not args.sqlite_only:
            try:
                url = f"{PG_URL}?schema={unique_schema('bench')}"
                results.append(await bench_store("PostgreSQL", url, args.revisions, args.steps, args.repeat))
            except OSError as exc:
                print(f"\nPostgreSQL skipped: {exc}")
    print(
        "\nevery page and diff within 50 ms" if all(results) else "\nsome page or diff took more than 50 ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
