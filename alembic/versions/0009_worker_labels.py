"""workers.labels: the node labels a worker registered with (placement.node_selector).

Revision ID: 0009_worker_labels
Revises: 0008_decisions_by_simulation
Create Date: 2026-12-03
"""

import sqlalchemy as sa

from alembic import op

revision = "0009_worker_labels"
down_revision = "0008_decisions_by_simulation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("labels", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("labels")
