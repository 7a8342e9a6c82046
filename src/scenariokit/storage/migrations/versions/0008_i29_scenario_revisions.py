"""Scenario revisions (docs/revisions.md): every change kept, every run tied to what it executed.

Adds ``scenario_revisions`` and the content-addressed ``revision_fields`` and ``revision_steps``, the
scenario's current
``revision`` and the run's ``scenario_revision``. Every scenario stored gets revision 1, its content as
it is now; runs not yet finished are tied to it (they would execute it), finished runs stay NULL (what
they executed is not known).

Revision ID: 0008_i29_scenario_revisions
Revises: 0008_audit_log
Create Date: 2026-11-26
"""

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008_i29_scenario_revisions"
down_revision = "0008_audit_log"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_CHUNK = 500


def _revision_one(bind: sa.Connection) -> None:
    """Revision 1 of every stored scenario: its content now, hashed by the domain's rules."""
    from scenariokit.domain.model import CredentialLink, Retries, Step
    from scenariokit.domain.revisions import (
        ScenarioContent,
        content_hash,
        fields_document,
        fields_hash,
        step_hash,
    )

    scenarios = sa.table(
        "scenarios",
        sa.column("id", sa.Uuid()),
        sa.column("name", sa.String()),
        sa.column("description", sa.Text()),
        sa.column("environment_id", sa.Uuid()),
        sa.column("timeout_seconds", sa.Float()),
        sa.column("retries", _JSON),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    steps = sa.table(
        "steps",
        sa.column("id", sa.Uuid()),
        sa.column("scenario_id", sa.Uuid()),
        sa.column("position", sa.Integer()),
        sa.column("title", sa.Text()),
        sa.column("exec_code", sa.Text()),
        sa.column("timeout_seconds", sa.Float()),
    )
    links = sa.table(
        "scenario_credentials",
        sa.column("scenario_id", sa.Uuid()),
        sa.column("credential_id", sa.Uuid()),
        sa.column("alias", sa.String()),
        sa.column("position", sa.Integer()),
    )
    revisions = sa.table(
        "scenario_revisions",
        sa.column("scenario_id", sa.Uuid()),
        sa.column("number", sa.Integer()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("source", sa.String()),
        sa.column("token_name", sa.String()),
        sa.column("message", sa.Text()),
        sa.column("content_hash", sa.String()),
        sa.column("fields_seq", sa.Integer()),
        sa.column("steps", _JSON),
    )
    documents = sa.table(
        "revision_fields",
        sa.column("seq", sa.Integer()),
        sa.column("scenario_id", sa.Uuid()),
        sa.column("hash", sa.String()),
        sa.column("fields", _JSON),
    )
    bodies = sa.table(
        "revision_steps",
        sa.column("seq", sa.Integer()),
        sa.column("scenario_id", sa.Uuid()),
        sa.column("hash", sa.String()),
        sa.column("step_id", sa.Uuid()),
        sa.column("title", sa.Text()),
        sa.column("exec_code", sa.Text()),
        sa.column("timeout_seconds", sa.Float()),
    )
    now = datetime.now(UTC)
    if bind.dialect.name == "sqlite":
        now = now.replace(tzinfo=None)
    ids = [row.id for row in bind.execute(sa.select(scenarios.c.id).order_by(scenarios.c.id))]
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        heads = bind.execute(sa.select(scenarios).where(scenarios.c.id.in_(chunk))).all()
        step_rows: dict[uuid.UUID, list[Any]] = {ident: [] for ident in chunk}
        for row in bind.execute(
            sa.select(steps).where(steps.c.scenario_id.in_(chunk)).order_by(steps.c.position)
        ):
            step_rows[row.scenario_id].append(row)
        link_rows: dict[uuid.UUID, list[Any]] = {ident: [] for ident in chunk}
        for row in bind.execute(
            sa.select(links).where(links.c.scenario_id.in_(chunk)).order_by(links.c.position, links.c.alias)
        ):
            link_rows[row.scenario_id].append(row)
        for head in heads:
            stored = head.retries if not isinstance(head.retries, str) else json.loads(head.retries)
            stored = stored or {}
            retries = Retries(
                count=stored.get("count", 0),
                backoff=stored.get("backoff", "fixed"),
                backoff_seconds=stored.get("backoffSeconds", 0.0),
            )
            content = ScenarioContent(
                name=head.name,
                description=head.description,
                environment_id=head.environment_id,
                timeout_seconds=head.timeout_seconds,
                retries=retries,
                credentials=tuple(
                    CredentialLink(credential_id=r.credential_id, alias=r.alias) for r in link_rows[head.id]
                ),
                steps=tuple(
                    Step(
                        exec_code=r.exec_code,
                        order=i,
                        title=r.title,
                        timeout_seconds=r.timeout_seconds,
                        id=r.id,
                    )
                    for i, r in enumerate(step_rows[head.id], start=1)
                ),
            )
            seqs: dict[str, int] = {}
            for step in content.steps:
                digest = step_hash(step)
                if digest in seqs:
                    continue
                seqs[digest] = bind.execute(
                    sa.insert(bodies)
                    .values(
                        scenario_id=head.id,
                        hash=digest,
                        step_id=step.id,
                        title=step.title,
                        exec_code=step.exec_code,
                        timeout_seconds=step.timeout_seconds,
                    )
                    .returning(bodies.c.seq)
                ).scalar_one()
            fields_seq = bind.execute(
                sa.insert(documents)
                .values(scenario_id=head.id, hash=fields_hash(content), fields=fields_document(content))
                .returning(documents.c.seq)
            ).scalar_one()
            bind.execute(
                sa.insert(revisions).values(
                    scenario_id=head.id,
                    number=1,
                    created_at=now,
                    source="library",
                    token_name=None,
                    message="the scenario as it was when revisions began to be kept",
                    content_hash=content_hash(content),
                    fields_seq=fields_seq,
                    steps=[seqs[step_hash(step)] for step in content.steps],
                )
            )


def upgrade() -> None:
    op.create_table(
        "scenario_revisions",
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column("number", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("token_name", sa.String(200), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("fields_seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("steps", _JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenarios.id"],
            name="fk_scenario_revisions_scenario_id_scenarios",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("scenario_id", "number", name="pk_scenario_revisions"),
    )
    op.create_table(
        "revision_fields",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("fields", _JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenarios.id"],
            name="fk_revision_fields_scenario_id_scenarios",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("seq", name="pk_revision_fields"),
        sa.UniqueConstraint("scenario_id", "hash", name="uq_revision_fields_scenario_id_hash"),
    )
    op.create_table(
        "revision_steps",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("step_id", sa.Uuid(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("exec_code", sa.Text(), nullable=False),
        sa.Column("timeout_seconds", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenarios.id"],
            name="fk_revision_steps_scenario_id_scenarios",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("seq", name="pk_revision_steps"),
        sa.UniqueConstraint("scenario_id", "hash", name="uq_revision_steps_scenario_id_hash"),
    )
    # plain ALTER TABLE, never a batch copy: SQLite would recreate ``runs`` and lose run_counts' triggers
    op.add_column("scenarios", sa.Column("revision", sa.Integer(), nullable=False, server_default="1"))
    op.add_column("runs", sa.Column("scenario_revision", sa.Integer(), nullable=True))
    op.create_index(
        "ix_runs_scenario_id_status_finished_at", "runs", ["scenario_id", "status", "finished_at"]
    )
    _revision_one(op.get_bind())
    op.execute("UPDATE runs SET scenario_revision = 1 WHERE status = 'in_progress'")


def downgrade() -> None:
    op.drop_index("ix_runs_scenario_id_status_finished_at", "runs")
    op.drop_column("runs", "scenario_revision")
    op.drop_column("scenarios", "revision")
    op.drop_table("revision_steps")
    op.drop_table("revision_fields")
    op.drop_table("scenario_revisions")
