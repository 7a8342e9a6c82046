"""SQLAlchemy Core tables. The domain never sees them: repositories translate rows to domain objects."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite keeps no zone)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        value = as_utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a time without a zone is taken as UTC already (how the stores keep times)."""
    if value.tzinfo is UTC:
        return value
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def sqlite_time_text(value: datetime | None) -> str | None:
    """A :class:`UTCDateTime` value as SQLite stores it, in one call: the text SQLAlchemy's own bind
    processors (the decorator's, then SQLite's ``DATETIME``) would write, ``2026-11-30 17:08:27.694000``.

    The store's own INSERTs (:mod:`.inserts`) write a run's log lines with it: through the two
    processors a time cost 4 µs a row, the most of any column.
    """
    if value is None:
        return None
    value = as_utc(value)
    return _SQLITE_TIME % (
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
    )


#: SQLite's ``DATETIME`` storage format, by position
_SQLITE_TIME = "%04d-%02d-%02d %02d:%02d:%02d.%06d"


JSONType: Any = sa.JSON().with_variant(JSONB(), "postgresql")


def _timestamps() -> list[sa.Column[Any]]:
    return [
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    ]


environments = sa.Table(
    "environments",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text()),
    sa.Column("data", JSONType, nullable=False),
    *_timestamps(),
    # browser settings (docs/browser.md); NULL reads as none set
    sa.Column("browser", JSONType),
    sa.Index(None, "updated_at", "id"),
    sa.Index(None, "name", "id"),
)

credentials = sa.Table(
    "credentials",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text()),
    sa.Column("username", sa.Text()),
    sa.Column("secret_encrypted", sa.Text()),
    *_timestamps(),
    sa.Index(None, "updated_at", "id"),
    sa.Index(None, "name", "id"),
)

scenarios = sa.Table(
    "scenarios",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text()),
    sa.Column(
        "environment_id", sa.Uuid(), sa.ForeignKey("environments.id", ondelete="SET NULL"), nullable=True
    ),
    sa.Column("timeout_seconds", sa.Float()),
    *_timestamps(),
    sa.Column("retries", JSONType),
    sa.Column("browser", JSONType),
    # the number of the scenario's current revision (its row in ``scenario_revisions``)
    sa.Column("revision", sa.Integer(), nullable=False, server_default="1"),
    sa.Index(None, "updated_at", "id"),
    sa.Index(None, "name", "id"),
    sa.Index(None, "created_at", "id"),
    sa.Index(None, "environment_id"),
)

steps = sa.Table(
    "steps",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), nullable=False),
    sa.Column("position", sa.Integer(), nullable=False),
    sa.Column("title", sa.Text()),
    sa.Column("exec_code", sa.Text(), nullable=False),
    sa.Column("timeout_seconds", sa.Float()),
    sa.Index(None, "scenario_id", "position"),
)

scenario_credentials = sa.Table(
    "scenario_credentials",
    metadata,
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), primary_key=True),
    sa.Column(
        "credential_id", sa.Uuid(), sa.ForeignKey("credentials.id", ondelete="RESTRICT"), primary_key=True
    ),
    sa.Column("alias", sa.String(64), nullable=False),
    sa.Column("position", sa.Integer(), nullable=False, server_default="0"),
    sa.UniqueConstraint("scenario_id", "alias"),
    sa.Index(None, "credential_id"),
)

snippets = sa.Table(
    "snippets",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("alias", sa.String(64), nullable=False, unique=True),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("description", sa.Text()),
    sa.Column("code", sa.Text(), nullable=False),
    *_timestamps(),
    sa.Index(None, "updated_at", "id"),
    sa.Index(None, "title", "id"),
)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("token_encrypted", sa.Text()),
    sa.Column("storage_state_encrypted", sa.Text()),
    sa.Column("run_id", sa.Uuid()),
    *_timestamps(),
    sa.Index(None, "created_at", "id"),
    sa.Index(None, "name", "id"),
    sa.Index(None, "run_id"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), nullable=False),
    # Copied from the scenario (and kept in step on rename) so "sort by scenario name" needs no join.
    sa.Column("scenario_name", sa.String(200), nullable=False),
    # No foreign key: deleting an environment keeps its runs readable.
    sa.Column("environment_id", sa.Uuid(), nullable=False),
    sa.Column("save_session", sa.Boolean(), nullable=False),
    sa.Column("session_id", sa.Uuid()),
    sa.Column("source_session_id", sa.Uuid()),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", JSONType),
    sa.Column("step_results", JSONType, nullable=False),
    sa.Column("artifacts", JSONType, nullable=False),
    sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("lease_owner", sa.String(200)),
    sa.Column("lease_expires_at", UTCDateTime()),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("started_at", UTCDateTime()),
    sa.Column("finished_at", UTCDateTime()),
    sa.Column("timings", JSONType),
    sa.Column("attempts", JSONType),
    sa.Column("flaky", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("batch_id", sa.Uuid()),
    # No foreign key: deleting a schedule keeps the runs it queued readable.
    sa.Column("schedule_id", sa.Uuid()),
    sa.Column("browser", JSONType),
    # the revision of the scenario the run executes (NULL: queued before revisions were kept)
    sa.Column("scenario_revision", sa.Integer()),
    sa.Index(None, "created_at", "id"),
    sa.Index(None, "scenario_name", "id"),
    sa.Index(None, "status", "created_at", "id"),
    sa.Index(None, "status", "id"),
    sa.Index(None, "scenario_id", "created_at", "id"),
    sa.Index(None, "environment_id", "created_at", "id"),  # an environment's runs, newest first
    sa.Index(None, "status", "lease_owner", "created_at"),
    sa.Index(None, "batch_id"),
    sa.Index(None, "schedule_id"),
    sa.Index(None, "scenario_id", "status", "finished_at"),  # a scenario's last pass
)

schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", sa.Uuid(), primary_key=True),
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), nullable=False),
    sa.Column("environment_ids", JSONType, nullable=False),
    sa.Column("cron", sa.String(200)),
    sa.Column("interval_seconds", sa.Integer()),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("enabled", sa.Boolean(), nullable=False),
    sa.Column("last_fired_at", UTCDateTime()),
    sa.Column("next_fire_at", UTCDateTime()),
    *_timestamps(),
    sa.Index(None, "created_at", "id"),
    sa.Index(None, "updated_at", "id"),
    sa.Index(None, "next_fire_at", "id"),
    sa.Index(None, "scenario_id"),
)

# Revisions (docs/revisions.md): one row per revision, its fields as the ``seq`` of a document in
# ``revision_fields`` and its steps as the ``seq`` of their bodies in ``revision_steps`` (in order).
# Fields and step bodies are stored once per scenario and content (``hash``): an edit of one step of
# twenty adds one body, not twenty, and no fields. All go with their scenario.
scenario_revisions = sa.Table(
    "scenario_revisions",
    metadata,
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("number", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("token_name", sa.String(200)),
    sa.Column("message", sa.Text()),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("fields_seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column("steps", JSONType, nullable=False),
)

revision_fields = sa.Table(
    "revision_fields",
    metadata,
    sa.Column(
        "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("fields", JSONType, nullable=False),
    sa.UniqueConstraint("scenario_id", "hash"),
)

revision_steps = sa.Table(
    "revision_steps",
    metadata,
    sa.Column(
        "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("step_id", sa.Uuid(), nullable=False),
    sa.Column("title", sa.Text()),
    sa.Column("exec_code", sa.Text(), nullable=False),
    sa.Column("timeout_seconds", sa.Float()),
    sa.UniqueConstraint("scenario_id", "hash"),
)

# One row per write through any door (docs/deployment.md, "Audit log"). No foreign keys: an entry
# outlives the record it names. Its key is (at, id), the log's own order: entries are appended at its
# end and a newest-first page reads the key (or a filter's index, which ends with it) backwards,
# twenty rows of it whatever the log's size. On SQLite the table is that key's B-tree (WITHOUT ROWID)
# rather than a rowid table beside it: a write's entry updates three B-trees instead of five
# (migration 0010).
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Uuid(), nullable=False),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("token_name", sa.String(64)),
    sa.Column("door", sa.String(16), nullable=False),
    sa.Column("action", sa.String(16), nullable=False),
    sa.Column("resource", sa.String(32), nullable=False),
    sa.Column("resource_id", sa.Uuid()),
    sa.Column("summary", sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint("at", "id"),
    sa.Index(None, "resource", "at", "id"),
    sa.Index(None, "token_name", "at", "id"),
    sqlite_with_rowid=False,
)

# How many audit entries there are per resource and token name (``''``: none), kept by triggers on
# ``audit_log`` (migration 0010) in the transaction that writes the entry, as ``run_counts`` keeps the
# runs': a page's total is a sum over these few rows. On PostgreSQL an entry counts in one of 16 rows
# per pair (``shard``, by the writing connection) so that writers at the same moment seldom wait for
# one row's lock; only the sum over the rows means something. On SQLite, whose writers take turns
# anyway, ``shard`` is 0.
audit_counts = sa.Table(
    "audit_counts",
    metadata,
    sa.Column("resource", sa.String(32), primary_key=True),
    sa.Column("token_name", sa.String(64), primary_key=True),
    sa.Column("shard", sa.SmallInteger(), primary_key=True),
    sa.Column("n", sa.BigInteger(), nullable=False),
)

run_logs = sa.Table(
    "run_logs",
    metadata,
    sa.Column(
        "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    sa.Column("run_id", sa.Uuid(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("level", sa.String(16), nullable=False),
    sa.Column("step_id", sa.Uuid()),
    sa.Column("message", sa.Text(), nullable=False),
    sa.Index(None, "run_id", "seq"),
)

# How many runs each scenario has in each environment and status, kept by triggers on ``runs``
# (migrations 0004 and 0011) in the transaction that writes the run: the total of a page of runs is a
# sum over these few rows, where a count of a million runs took seconds.
run_counts = sa.Table(
    "run_counts",
    metadata,
    sa.Column("scenario_id", sa.Uuid(), sa.ForeignKey("scenarios.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("environment_id", sa.Uuid(), primary_key=True),
    sa.Column("status", sa.String(16), primary_key=True),
    sa.Column("n", sa.BigInteger(), nullable=False),
)

# Facts about the store itself (name → value): the salt passphrase keys are derived with, and the
# fingerprints of the keys that encrypted what it holds. Never a key.
store_metadata = sa.Table(
    "store_metadata",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
)

#: Every column holding a secret encrypted with the store's keys (rotation re-encrypts them all).
ENCRYPTED_COLUMNS: tuple[tuple[sa.Table, str], ...] = (
    (credentials, "secret_encrypted"),
    (sessions, "token_encrypted"),
    (sessions, "storage_state_encrypted"),
)
