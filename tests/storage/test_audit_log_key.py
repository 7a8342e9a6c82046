"""The audit log is keyed by (at, id), its own order (migration 0010), on SQLite and PostgreSQL: the
newest-first page reads the key, an entry updates no index beyond the two filters', and a store
migrated with entries in it keeps every one of them, in the same order, both ways."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic import command

from scenariokit.domain.audit import AuditEntry, entry_id
from scenariokit.formats.queries import AuditQuery
from scenariokit.storage.migrations import alembic_config
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t

BEFORE = "0009_browser_settings_b33"
postgresql_only = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
T0 = datetime(2026, 11, 30, 9, 0, 0, 250000, tzinfo=UTC)


def _layout(sync: sa.Connection) -> tuple[list[str], set[str], bool | None]:
    inspector = sa.inspect(sync)
    key = list(inspector.get_pk_constraint("audit_log")["constrained_columns"])
    indexes = {str(index["name"]) for index in inspector.get_indexes("audit_log")}
    without_rowid = None
    if sync.dialect.name == "sqlite":
        sql = sync.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'audit_log'").scalar_one()
        without_rowid = "WITHOUT ROWID" in sql.upper()
    return key, indexes, without_rowid


async def _layout_of(store: SqlStore) -> tuple[list[str], set[str], bool | None]:
    async with store.engine.connect() as conn:
        return await conn.run_sync(_layout)


def _entries() -> list[AuditEntry]:
    """Entries out of order, two of them at the same instant (the id orders those)."""
    same = T0 + timedelta(seconds=5)
    return [
        AuditEntry(at=T0 + timedelta(seconds=9), action="create", resource="scenario", summary="nine"),
        AuditEntry(at=T0, token_name="ci", action="update", resource="environment", summary="zero"),
        AuditEntry(at=same, token_name="ci", action="run", resource="scenario", summary="five a"),
        AuditEntry(at=same, action="delete", resource="scenario", summary="five b"),
        AuditEntry(at=T0 + timedelta(seconds=2), door="mcp", action="create", resource="snippet"),
    ]


async def _add(store: SqlStore, entries: list[AuditEntry]) -> None:
    async with store.unit_of_work() as uow:
        for entry in entries:
            await uow.audit.add(entry)
        await uow.commit()


async def _listed(store: SqlStore, query: AuditQuery) -> list[AuditEntry]:
    async with store.unit_of_work(readonly=True) as uow:
        return list((await uow.audit.list(query)).items)


async def _total(store: SqlStore, query: AuditQuery) -> int:
    async with store.unit_of_work(readonly=True) as uow:
        return (await uow.audit.list(query)).total


async def _assert_totals_are_counted_right(store: SqlStore) -> None:
    """Every filter's total, from the kept counts or the range, against a count of the entries."""
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(t.audit_log.c.resource, t.audit_log.c.token_name))).all()
    pairs = [(resource, token_name) for resource, token_name in rows]
    assert await _total(store, AuditQuery()) == len(pairs)
    for resource in ("scenario", "environment", "snippet", "schedule", "credential"):
        expected = sum(1 for kind, _ in pairs if kind == resource)
        assert await _total(store, AuditQuery(resource=resource)) == expected, resource
        assert await _total(store, AuditQuery(resource=resource, token_name="ci")) == sum(
            1 for kind, name in pairs if kind == resource and name == "ci"
        )
    assert await _total(store, AuditQuery(token_name="ci")) == sum(1 for _, name in pairs if name == "ci")
    assert await _total(store, AuditQuery(token_name="nobody")) == 0


def _newest_first(entries: list[AuditEntry]) -> list[AuditEntry]:
    return sorted(entries, key=lambda entry: (entry.at, entry.id), reverse=True)


async def test_the_log_is_keyed_by_time_and_id_with_the_two_filters_indexed(store: SqlStore) -> None:
    key, indexes, without_rowid = await _layout_of(store)
    assert key == ["at", "id"]
    assert indexes == {"ix_audit_log_resource_at_id", "ix_audit_log_token_name_at_id"}
    assert without_rowid in (True, None)  # None: PostgreSQL, which has no rowid to leave out


async def test_pages_come_newest_first_and_entries_at_one_instant_by_id(store: SqlStore) -> None:
    entries = _entries()
    await _add(store, entries)
    expected = _newest_first(entries)
    assert await _listed(store, AuditQuery()) == expected
    assert await _listed(store, AuditQuery(order_dir="asc")) == expected[::-1]
    first = await _listed(store, AuditQuery(limit=2, page=1))
    second = await _listed(store, AuditQuery(limit=2, page=2))
    assert first + second == expected[:4]
    scenarios = [entry for entry in expected if entry.resource == "scenario"]
    assert await _listed(store, AuditQuery(resource="scenario")) == scenarios
    assert await _listed(store, AuditQuery(token_name="ci")) == [e for e in expected if e.token_name == "ci"]
    since = await _listed(store, AuditQuery(since=T0 + timedelta(seconds=5)))
    assert since == [entry for entry in expected if entry.at >= T0 + timedelta(seconds=5)]


async def test_a_store_migrated_with_entries_keeps_them_both_ways(store: SqlStore) -> None:
    written = _entries()
    await _add(store, written[:3])
    async with store.engine.begin() as conn:  # back to the log keyed by id alone
        await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), BEFORE))
    key, indexes, without_rowid = await _layout_of(store)
    assert key == ["id"] and "ix_audit_log_at_id" in indexes and without_rowid in (False, None)
    await _add(store, written[3:])  # written under the old key
    await store.upgrade()
    assert (await _layout_of(store))[0] == ["at", "id"]
    assert await _listed(store, AuditQuery()) == _newest_first(written)
    await _assert_totals_are_counted_right(store)  # the counts start with the entries already there

    late = AuditEntry(at=T0 + timedelta(minutes=1), id=uuid.uuid4(), action="fire", resource="schedule")
    await _add(store, [late])
    assert (await _listed(store, AuditQuery(limit=1)))[0] == late


def test_entry_ids_are_version_7_and_come_in_the_order_they_were_made() -> None:
    before = time.time_ns() // 1_000_000
    ids = [entry_id() for _ in range(5000)]  # thousands in one millisecond: the counter orders them
    after = time.time_ns() // 1_000_000
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {made.version for made in ids} == {7}
    assert before <= ids[0].int >> 80 and ids[-1].int >> 80 <= after + len(ids) // 4096


async def test_entries_written_in_one_millisecond_list_in_the_order_they_were_written(
    store: SqlStore,
) -> None:
    entries = [AuditEntry(at=T0, action="create", resource="scenario", summary=f"#{i}") for i in range(30)]
    for entry in entries:
        await _add(store, [entry])
    assert [entry.summary for entry in await _listed(store, AuditQuery(limit=30))] == [
        f"#{i}" for i in reversed(range(30))
    ]


async def test_totals_come_from_the_kept_counts_and_follow_a_prune(store: SqlStore) -> None:
    entries = [
        AuditEntry(
            at=T0 + timedelta(seconds=i),
            token_name=("ci", "ops", None)[i % 3],
            action="create",
            resource=("scenario", "environment", "snippet", "schedule")[i % 4],
        )
        for i in range(120)
    ]
    await _add(store, entries[:100])
    for entry in entries[100:]:  # one transaction each, as writes come
        await _add(store, [entry])
    await _assert_totals_are_counted_right(store)
    since = T0 + timedelta(seconds=90)
    assert await _total(store, AuditQuery(since=since)) == 30
    assert await _total(store, AuditQuery(since=since, resource="snippet", token_name="ops")) == sum(
        1 for e in entries if e.at >= since and e.resource == "snippet" and e.token_name == "ops"
    )
    # an operator prunes the log's first minute with SQL of their own: the totals follow
    async with store.engine.begin() as conn:
        cut = sa.bindparam("cut", T0 + timedelta(seconds=60), type_=t.UTCDateTime())
        deleted = await conn.execute(sa.delete(t.audit_log).where(t.audit_log.c.at < cut))
    assert deleted.rowcount == 60
    await _assert_totals_are_counted_right(store)
    assert await _total(store, AuditQuery()) == 60


@pytest.mark.postgres
@postgresql_only
async def test_on_postgresql_concurrent_writers_of_many_entries_never_deadlock_on_the_counts(
    store: SqlStore,
) -> None:
    """Each transaction's entries of one resource and token name count in one row (its connection's),
    so two transactions writing several entries at once never take two counting rows in opposite
    orders: none fails, and the totals are exact."""

    async def writer(name: str) -> None:
        for round_ in range(80):  # enough that an entry-by-entry choice of row deadlocks
            async with store.unit_of_work() as uow:  # as an import writes: a statement between entries
                for resource in ("environment", "snippet", "scenario"):
                    for _ in range(4):
                        entry = AuditEntry(
                            action="import", resource=resource, token_name=name, summary=f"{round_}"
                        )
                        await uow.audit.add(entry)
                        await uow.audit.list(AuditQuery(limit=1))
                await uow.commit()

    await asyncio.gather(writer("ci"), writer("ci"), writer("ops"))
    assert await _total(store, AuditQuery()) == 3 * 80 * 12
    await _assert_totals_are_counted_right(store)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(t.audit_counts))).all()
    assert sum(row.n for row in rows) == 3 * 80 * 12
