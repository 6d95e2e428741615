"""rounds.llm_requests: LLM requests a round sent (agents sharing identical prompts share one)

Revision ID: 0006_round_llm_requests
Revises: 0005_worker_rpc_auth
Create Date: 2026-12-03
"""

import sqlalchemy as sa

from alembic import op

revision = "0006_round_llm_requests"
down_revision = "0005_worker_rpc_auth"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(
            sa.Column("llm_requests", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )


def downgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("llm_requests")
