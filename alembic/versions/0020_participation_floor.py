"""simulations.participation_floor and simulations.rounds_below_floor: validity gates

A round in which fewer than the run's participation floor of its agents gave a valid answer is
counted when it is kept (backend.simulations.validity), so a run with such rounds is never shown
as whole. Runs kept before this revision count none and have the default floor.

Revision ID: 0020_participation_floor
Revises: 0019_decisions_by_change
Create Date: 2026-12-06
"""

import sqlalchemy as sa

from alembic import op

revision = "0020_participation_floor"
down_revision = "0019_decisions_by_change"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("simulations") as batch:
        batch.add_column(
            sa.Column("rounds_below_floor", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column(
                "participation_floor", sa.Float(), nullable=False, server_default=sa.text("0.8")
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("simulations") as batch:
        batch.drop_column("participation_floor")
        batch.drop_column("rounds_below_floor")
