"""populations and agents

Revision ID: 0002_populations
Revises: 0001_workers
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision = "0002_populations"
down_revision = "0001_workers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "populations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(
            "status IN ('deploying', 'deployed', 'failed', 'deleting', 'deleted')",
            name="ck_populations_status",
        ),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=False),
        # No foreign keys: see backend.db.models.Agent (COPY speed; rows are never deleted).
        sa.Column("population_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column(
            "attributes",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=False,
        ),
        sa.Column("persona", sa.Text(), nullable=False),
        sa.Column("orphaned", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_agents_population_id_id", "agents", ["population_id", "id"])
    op.create_index("ix_agents_worker_id_id", "agents", ["worker_id", "id"])
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(
            "ix_agents_attributes",
            "agents",
            ["attributes"],
            postgresql_using="gin",
            postgresql_ops={"attributes": "jsonb_path_ops"},
        )


def downgrade() -> None:
    # Dropping a table drops its indexes on both databases.
    op.drop_table("agents")
    op.drop_table("populations")
