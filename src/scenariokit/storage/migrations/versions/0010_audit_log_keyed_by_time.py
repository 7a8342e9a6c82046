"""The audit log keyed by (at, id), its own order, and counted as it is written: a page at any size.

A page of the audit log showed its total as a window count over every matching entry, sorted: over a
million entries a first page took 1.3 s on SQLite and 0.27 s on PostgreSQL, and every write adds an
entry (a queued run is one), so the log only grows. Now:

- the key is (at, id), which a newest-first page reads backwards, twenty rows of it; the filters'
  indexes end with it, so a filtered page reads its index the same way. The index on (at, id) goes.
  On SQLite the table is the key's B-tree itself (``WITHOUT ROWID``): an entry updates three B-trees
  instead of five;
- ``audit_counts`` holds how many entries there are per resource and token name, kept by triggers in
  the transaction that writes (or, where an operator prunes the log, deletes) the entries, as
  ``run_counts`` keeps the runs' (migration 0004). On PostgreSQL an entry counts in one of 16 rows per
  pair, picked by the connection that writes it, so that two writers at the same moment seldom wait
  for one row's lock; a transaction's entries of one pair all count in one row, so two transactions
  never take those rows' locks in opposite orders (which, picked by each entry's id, they could, and
  deadlock). A total is the sum over the rows: what one row holds means nothing alone (a deletion
  subtracts from the deleting connection's row), and may be below zero.

SQLite cannot change a table's key in place: the rows are copied into a new table, in the migration's
transaction, and the old table dropped (nothing refers to ``audit_log``, so nothing cascades).
PostgreSQL swaps the key's constraint and the indexes.

Revision ID: 0010_audit_log_keyed_by_time
Revises: 0009_browser_settings_b33
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_audit_log_keyed_by_time"
down_revision = "0009_browser_settings_b33"
branch_labels = None
depends_on = None

COLUMNS = "id, at, token_name, door, action, resource, resource_id, summary"
OLD_INDEXES = (
    ("ix_audit_log_at_id", ["at", "id"]),
    ("ix_audit_log_resource_at", ["resource", "at"]),
    ("ix_audit_log_token_name_at", ["token_name", "at"]),
)
NEW_INDEXES = (
    ("ix_audit_log_resource_at_id", ["resource", "at", "id"]),
    ("ix_audit_log_token_name_at_id", ["token_name", "at", "id"]),
)

#: the counting row of the entries a PostgreSQL connection writes or deletes: one of 16 per resource and
#: token name, by the connection's server process
_PG_SHARD = "pg_backend_pid() % 16"

_SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER audit_counts_insert AFTER INSERT ON audit_log BEGIN
        INSERT INTO audit_counts (resource, token_name, shard, n)
        VALUES (NEW.resource, coalesce(NEW.token_name, ''), 0, 1)
        ON CONFLICT (resource, token_name, shard) DO UPDATE SET n = n + 1;
    END
    """,
    """
    CREATE TRIGGER audit_counts_delete AFTER DELETE ON audit_log BEGIN
        UPDATE audit_counts SET n = n - 1
        WHERE resource = OLD.resource AND token_name = coalesce(OLD.token_name, '') AND shard = 0;
    END
    """,
)

# Statement triggers with the statement's rows as a table: an import's entries, or a prune of a
# million, are counted in one grouped statement.
_POSTGRES_TRIGGERS = (
    f"""
    CREATE FUNCTION audit_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO audit_counts (resource, token_name, shard, n)
        SELECT resource, coalesce(token_name, ''), {_PG_SHARD}, count(*)
        FROM added GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3
        ON CONFLICT (resource, token_name, shard) DO UPDATE SET n = audit_counts.n + EXCLUDED.n;
        RETURN NULL;
    END
    $$
    """,
    f"""
    CREATE FUNCTION audit_counts_subtract() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO audit_counts (resource, token_name, shard, n)
        SELECT resource, coalesce(token_name, ''), {_PG_SHARD}, -count(*)
        FROM removed GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3
        ON CONFLICT (resource, token_name, shard) DO UPDATE SET n = audit_counts.n + EXCLUDED.n;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER audit_counts_insert AFTER INSERT ON audit_log
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION audit_counts_add()
    """,
    """
    CREATE TRIGGER audit_counts_delete AFTER DELETE ON audit_log
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION audit_counts_subtract()
    """,
)


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("token_name", sa.String(64), nullable=True),
        sa.Column("door", sa.String(16), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("resource", sa.String(32), nullable=False),
        sa.Column("resource_id", sa.Uuid(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
    ]


def _rebuild_on_sqlite(key: list[str], *, with_rowid: bool) -> None:
    op.create_table(
        "audit_log_new",
        *_columns(),
        sa.PrimaryKeyConstraint(*key, name="pk_audit_log"),
        sqlite_with_rowid=with_rowid,
    )
    op.execute(f"INSERT INTO audit_log_new ({COLUMNS}) SELECT {COLUMNS} FROM audit_log")
    op.drop_table("audit_log")
    op.rename_table("audit_log_new", "audit_log")


def _rekey_on_postgresql(key: list[str]) -> None:
    op.drop_constraint("pk_audit_log", "audit_log", type_="primary")
    op.create_primary_key("pk_audit_log", "audit_log", key)


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        _rekey_on_postgresql(["at", "id"])
        for name, _ in OLD_INDEXES:
            op.drop_index(name, table_name="audit_log")
    else:
        _rebuild_on_sqlite(["at", "id"], with_rowid=False)
    for name, columns in NEW_INDEXES:
        op.create_index(name, "audit_log", columns)

    op.create_table(
        "audit_counts",
        sa.Column("resource", sa.String(32), nullable=False),
        sa.Column("token_name", sa.String(64), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("resource", "token_name", "shard", name="pk_audit_counts"),
    )
    op.execute(
        "INSERT INTO audit_counts (resource, token_name, shard, n) "
        "SELECT resource, coalesce(token_name, ''), 0, count(*) FROM audit_log GROUP BY 1, 2"
    )
    if postgres:
        # Every entry written updates one of these rows: room on the page keeps the updates HOT (old
        # versions pruned in place) and vacuum comes early, as for run_counts.
        op.execute(
            "ALTER TABLE audit_counts SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.0, "
            "autovacuum_vacuum_threshold = 1000, autovacuum_analyze_threshold = 1000)"
        )
    for statement in _POSTGRES_TRIGGERS if postgres else _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in ("audit_counts_insert", "audit_counts_delete"):
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON audit_log" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS audit_counts_add()")
        op.execute("DROP FUNCTION IF EXISTS audit_counts_subtract()")
    op.drop_table("audit_counts")
    if postgres:
        for name, _ in NEW_INDEXES:
            op.drop_index(name, table_name="audit_log")
        _rekey_on_postgresql(["id"])
    else:
        _rebuild_on_sqlite(["id"], with_rowid=True)
    for name, columns in OLD_INDEXES:
        op.create_index(name, "audit_log", columns)
