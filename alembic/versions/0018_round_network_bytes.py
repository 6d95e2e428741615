"""rounds.network_bytes: bytes of values a network simulation's workers sent each other

Revision ID: 0018_round_network_bytes
Revises: 0017_population_graph
Create Date: 2026-12-06
"""

import sqlalchemy as sa

from alembic import op

revision = "0018_round_network_bytes"
down_revision = "0017_population_graph"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(
            sa.Column("network_bytes", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )


def downgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("network_bytes")
