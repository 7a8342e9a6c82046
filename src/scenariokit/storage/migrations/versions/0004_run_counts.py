"""Runs are counted as they are written: ``run_counts`` per scenario and status, kept by triggers.

A page of runs shows its total. Counting a million rows for it took seconds (SQLite) where the page
itself takes a millisecond, so the database keeps the counts itself, in the same transaction as each
insert, status change and delete of a run; a total is then a sum over at most (scenarios times statuses) rows.

Revision ID: 0004_run_counts
Revises: 0003_run_timings
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_run_counts"
down_revision = "0003_run_timings"
branch_labels = None
depends_on = None

_SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER run_counts_insert AFTER INSERT ON runs BEGIN
        INSERT INTO run_counts (scenario_id, status, n) VALUES (NEW.scenario_id, NEW.status, 1)
        ON CONFLICT (scenario_id, status) DO UPDATE SET n = n + 1;
    END
    """,
    """
    CREATE TRIGGER run_counts_update AFTER UPDATE OF status, scenario_id ON runs
    WHEN OLD.status IS NOT NEW.status OR OLD.scenario_id IS NOT NEW.scenario_id BEGIN
        UPDATE run_counts SET n = n - 1 WHERE scenario_id = OLD.scenario_id AND status = OLD.status;
        INSERT INTO run_counts (scenario_id, status, n) VALUES (NEW.scenario_id, NEW.status, 1)
        ON CONFLICT (scenario_id, status) DO UPDATE SET n = n + 1;
    END
    """,
    """
    CREATE TRIGGER run_counts_delete AFTER DELETE ON runs BEGIN
        UPDATE run_counts SET n = n - 1 WHERE scenario_id = OLD.scenario_id AND status = OLD.status;
    END
    """,
)

_POSTGRES_TRIGGERS = (
    """
    CREATE FUNCTION run_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE run_counts SET n = n - 1 WHERE scenario_id = OLD.scenario_id AND status = OLD.status;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO run_counts (scenario_id, status, n) VALUES (NEW.scenario_id, NEW.status, 1)
            ON CONFLICT (scenario_id, status) DO UPDATE SET n = run_counts.n + 1;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER run_counts_insert AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION run_counts_keep()
    """,
    """
    CREATE TRIGGER run_counts_update AFTER UPDATE OF status, scenario_id ON runs
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.scenario_id IS DISTINCT FROM NEW.scenario_id)
    EXECUTE FUNCTION run_counts_keep()
    """,
    """
    CREATE TRIGGER run_counts_delete AFTER DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION run_counts_keep()
    """,
)


def upgrade() -> None:
    op.create_table(
        "run_counts",
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenarios.id"],
            name=op.f("fk_run_counts_scenario_id_scenarios"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("scenario_id", "status", name=op.f("pk_run_counts")),
    )
    op.execute(
        "INSERT INTO run_counts (scenario_id, status, n) "
        "SELECT scenario_id, status, count(*) FROM runs GROUP BY scenario_id, status"
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        # Each run written updates one of these few rows: room on the page keeps the updates HOT (old
        # versions pruned in place) and vacuum comes early, so the sums read a few pages, not the bloat.
        op.execute(
            "ALTER TABLE run_counts SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.0, "
            "autovacuum_vacuum_threshold = 1000, autovacuum_analyze_threshold = 1000)"
        )
    for statement in _POSTGRES_TRIGGERS if postgres else _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in ("run_counts_insert", "run_counts_update", "run_counts_delete"):
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON runs" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS run_counts_keep()")
    op.drop_table("run_counts")
