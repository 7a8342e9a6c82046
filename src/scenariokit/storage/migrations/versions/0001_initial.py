"""Initial schema: scenarios, steps, credentials, links, environments, snippets, sessions, runs, logs.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "credentials",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("username", sa.Text(), nullable=True),
        sa.Column("secret_encrypted", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_credentials")),
    )
    op.create_index(op.f("ix_credentials_name_id"), "credentials", ["name", "id"], unique=False)
    op.create_index(op.f("ix_credentials_updated_at_id"), "credentials", ["updated_at", "id"], unique=False)
    op.create_table(
        "environments",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
    )
    op.create_index(op.f("ix_environments_name_id"), "environments", ["name", "id"], unique=False)
    op.create_index(op.f("ix_environments_updated_at_id"), "environments", ["updated_at", "id"], unique=False)
    op.create_table(
        "sessions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("token_encrypted", sa.Text(), nullable=True),
        sa.Column("storage_state_encrypted", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_index(op.f("ix_sessions_created_at_id"), "sessions", ["created_at", "id"], unique=False)
    op.create_index(op.f("ix_sessions_name_id"), "sessions", ["name", "id"], unique=False)
    op.create_index(op.f("ix_sessions_run_id"), "sessions", ["run_id"], unique=False)
    op.create_table(
        "snippets",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snippets")),
        sa.UniqueConstraint("alias", name=op.f("uq_snippets_alias")),
    )
    op.create_index(op.f("ix_snippets_title_id"), "snippets", ["title", "id"], unique=False)
    op.create_index(op.f("ix_snippets_updated_at_id"), "snippets", ["updated_at", "id"], unique=False)
    op.create_table(
        "scenarios",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("environment_id", sa.Uuid(), nullable=True),
        sa.Column("timeout_seconds", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_scenarios_environment_id_environments"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scenarios")),
    )
    op.create_index(op.f("ix_scenarios_created_at_id"), "scenarios", ["created_at", "id"], unique=False)
    op.create_index(op.f("ix_scenarios_environment_id"), "scenarios", ["environment_id"], unique=False)
    op.create_index(op.f("ix_scenarios_name_id"), "scenarios", ["name", "id"], unique=False)
    op.create_index(op.f("ix_scenarios_updated_at_id"), "scenarios", ["updated_at", "id"], unique=False)
    op.create_table(
        "runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column("scenario_name", sa.String(length=200), nullable=False),
        sa.Column("environment_id", sa.Uuid(), nullable=False),
        sa.Column("save_session", sa.Boolean(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=True),
        sa.Column("source_session_id", sa.Uuid(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "error",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "step_results",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "artifacts",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenarios.id"], name=op.f("fk_runs_scenario_id_scenarios"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_created_at_id"), "runs", ["created_at", "id"], unique=False)
    op.create_index(
        op.f("ix_runs_scenario_id_created_at_id"), "runs", ["scenario_id", "created_at", "id"], unique=False
    )
    op.create_index(op.f("ix_runs_scenario_name_id"), "runs", ["scenario_name", "id"], unique=False)
    op.create_index(
        op.f("ix_runs_status_created_at_id"), "runs", ["status", "created_at", "id"], unique=False
    )
    op.create_index(op.f("ix_runs_status_id"), "runs", ["status", "id"], unique=False)
    op.create_index(
        op.f("ix_runs_status_lease_owner_created_at"),
        "runs",
        ["status", "lease_owner", "created_at"],
        unique=False,
    )
    op.create_table(
        "scenario_credentials",
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column("credential_id", sa.Uuid(), nullable=False),
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["credential_id"],
            ["credentials.id"],
            name=op.f("fk_scenario_credentials_credential_id_credentials"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenarios.id"],
            name=op.f("fk_scenario_credentials_scenario_id_scenarios"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("scenario_id", "credential_id", name=op.f("pk_scenario_credentials")),
        sa.UniqueConstraint("scenario_id", "alias", name=op.f("uq_scenario_credentials_scenario_id_alias")),
    )
    op.create_index(
        op.f("ix_scenario_credentials_credential_id"), "scenario_credentials", ["credential_id"], unique=False
    )
    op.create_table(
        "steps",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("exec_code", sa.Text(), nullable=False),
        sa.Column("timeout_seconds", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenarios.id"], name=op.f("fk_steps_scenario_id_scenarios"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_steps")),
    )
    op.create_index(op.f("ix_steps_scenario_id_position"), "steps", ["scenario_id", "position"], unique=False)
    op.create_table(
        "run_logs",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("step_id", sa.Uuid(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_logs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_run_logs")),
    )
    op.create_index(op.f("ix_run_logs_run_id_seq"), "run_logs", ["run_id", "seq"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_run_logs_run_id_seq"), table_name="run_logs")
    op.drop_table("run_logs")
    op.drop_index(op.f("ix_steps_scenario_id_position"), table_name="steps")
    op.drop_table("steps")
    op.drop_index(op.f("ix_scenario_credentials_credential_id"), table_name="scenario_credentials")
    op.drop_table("scenario_credentials")
    op.drop_index(op.f("ix_runs_status_lease_owner_created_at"), table_name="runs")
    op.drop_index(op.f("ix_runs_status_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_status_created_at_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_scenario_name_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_scenario_id_created_at_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_created_at_id"), table_name="runs")
    op.drop_table("runs")
    op.drop_index(op.f("ix_scenarios_updated_at_id"), table_name="scenarios")
    op.drop_index(op.f("ix_scenarios_name_id"), table_name="scenarios")
    op.drop_index(op.f("ix_scenarios_environment_id"), table_name="scenarios")
    op.drop_index(op.f("ix_scenarios_created_at_id"), table_name="scenarios")
    op.drop_table("scenarios")
    op.drop_index(op.f("ix_snippets_updated_at_id"), table_name="snippets")
    op.drop_index(op.f("ix_snippets_title_id"), table_name="snippets")
    op.drop_table("snippets")
    op.drop_index(op.f("ix_sessions_run_id"), table_name="sessions")
    op.drop_index(op.f("ix_sessions_name_id"), table_name="sessions")
    op.drop_index(op.f("ix_sessions_created_at_id"), table_name="sessions")
    op.drop_table("sessions")
    op.drop_index(op.f("ix_environments_updated_at_id"), table_name="environments")
    op.drop_index(op.f("ix_environments_name_id"), table_name="environments")
    op.drop_table("environments")
    op.drop_index(op.f("ix_credentials_updated_at_id"), table_name="credentials")
    op.drop_index(op.f("ix_credentials_name_id"), table_name="credentials")
    op.drop_table("credentials")
