"""simulations.stores_changes and rounds.decisions_stored: runs that keep only what changed

A network simulation's agents keep their value from round to round, so such a run stores, per
round, only the decisions that differ from the agent's decision the round before (round 1: all);
readers carry the rest forward (backend.simulations.carried). rounds.decisions_stored says how
many rows each round wrote (NULL for rounds kept before this revision: every decision).

Revision ID: 0019_decisions_by_change
Revises: 0018_round_network_bytes
Create Date: 2026-12-06
"""

import sqlalchemy as sa

from alembic import op

revision = "0019_decisions_by_change"
down_revision = "0018_round_network_bytes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("simulations") as batch:
        batch.add_column(
            sa.Column("stores_changes", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(sa.Column("decisions_stored", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("decisions_stored")
    with op.batch_alter_table("simulations") as batch:
        batch.drop_column("stores_changes")
