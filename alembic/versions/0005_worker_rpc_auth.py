"""worker RPC auth: each worker's RPC secret and whether its gRPC port speaks TLS

Revision ID: 0005_worker_rpc_auth
Revises: 0004_fault_tolerance
Create Date: 2026-12-03
"""

import sqlalchemy as sa

from alembic import op

revision = "0005_worker_rpc_auth"
down_revision = "0004_fault_tolerance"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        # Rows from before this revision have no secret: their processes (of an older version,
        # which the manager cannot call now) must be restarted to register with one.
        batch.add_column(sa.Column("rpc_secret", sa.String(256), nullable=True))
        batch.add_column(sa.Column("tls", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("tls")
        batch.drop_column("rpc_secret")
