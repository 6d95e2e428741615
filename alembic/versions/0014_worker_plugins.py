"""workers.plugins: the simulation plugins a worker reported at registration ({name: version}),
checked at launch (backend.simulations.plugin_hosts). Rows of workers registered before this
have none: those workers register again (with their plugins) when restarted.

Revision ID: 0014_worker_plugins
Revises: 0013_round_metrics
Create Date: 2026-12-05
"""

import sqlalchemy as sa

from alembic import op

revision = "0014_worker_plugins"
down_revision = "0013_round_metrics"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("plugins", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("plugins")
