"""Rounds of a run with a mixed policy keep their breakdown by policy,
`rounds.metrics_by_policy` = {label: {agents, n_valid, n_invalid, n_late, n_lost, mean}};
null for rounds kept before it, {} for a run of one policy.

Revision ID: 0016_round_metrics_by_policy
Revises: 0015_configs_name_their_plugin
Create Date: 2026-12-06
"""

import sqlalchemy as sa

from alembic import op

revision = "0016_round_metrics_by_policy"
down_revision = "0015_configs_name_their_plugin"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(sa.Column("metrics_by_policy", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("metrics_by_policy")
