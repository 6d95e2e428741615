"""Populations may carry a graph: `populations.graph` holds its statistics (kind, nodes, edges,
degrees, components, clustering, degree histogram, cut fraction of the placement) and where its
file is; null for populations without a graph and those kept before it.

Revision ID: 0017_population_graph
Revises: 0016_round_metrics_by_policy
Create Date: 2026-12-10
"""

import sqlalchemy as sa

from alembic import op

revision = "0017_population_graph"
down_revision = "0016_round_metrics_by_policy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("populations") as batch:
        batch.add_column(sa.Column("graph", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("populations") as batch:
        batch.drop_column("graph")
