"""workers: one row per worker process

Revision ID: 0001_workers
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa

from alembic import op

revision = "0001_workers"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("address", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("lease", sa.String(64), nullable=False),
        sa.Column("drain_requested", sa.Boolean(), nullable=False),
        sa.Column("agents", sa.BigInteger(), nullable=False),
        sa.Column("capacity", sa.BigInteger(), nullable=False),
        sa.Column("cpu_percent", sa.Float(), nullable=False),
        sa.Column("rss_bytes", sa.BigInteger(), nullable=False),
        sa.Column("inflight_llm_calls", sa.Integer(), nullable=False),
        sa.Column("registered_at", sa.DateTime(), nullable=False),
        sa.Column("last_heartbeat", sa.DateTime(), nullable=False),
        sa.CheckConstraint(
            "state IN ('online', 'offline', 'draining', 'removed')", name="ck_workers_state"
        ),
    )
    op.create_index("ix_workers_state_last_heartbeat", "workers", ["state", "last_heartbeat"])


def downgrade() -> None:
    op.drop_index("ix_workers_state_last_heartbeat", table_name="workers")
    op.drop_table("workers")
