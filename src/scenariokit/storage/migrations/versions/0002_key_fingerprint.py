"""The store's own metadata: the salt of passphrase keys and the fingerprints of the keys it holds.

Revision ID: 0002_key_fingerprint
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_key_fingerprint"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_metadata",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_store_metadata")),
    )


def downgrade() -> None:
    op.drop_table("store_metadata")
