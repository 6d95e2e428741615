"""group_metrics: a plugin's figures per group, each round; simulations.group_labels

A simulation whose agents form groups (a network simulation's connected components, or
group_size groups) may declare group metrics (populace.plugin.Simulation.group_metrics): one
value per group each round, e.g. whether a group is at consensus and the round it got there.
Each (simulation, round, metric) is one row holding the values as zlib-compressed float64,
written in the round's transaction and deleted with the simulation. A run grouped by an
attribute (group_by) keeps its groups' category names in simulations.group_labels.

Revision ID: 0021_group_metrics
Revises: 0020_participation_floor
Create Date: 2026-12-06
"""

import sqlalchemy as sa

from alembic import op

revision = "0021_group_metrics"
down_revision = "0020_participation_floor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "group_metrics",
        sa.Column("simulation_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("round", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("groups", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("simulation_id", "round", "name"),
    )
    with op.batch_alter_table("simulations") as batch:
        batch.add_column(sa.Column("group_labels", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("simulations") as batch:
        batch.drop_column("group_labels")
    op.drop_table("group_metrics")
