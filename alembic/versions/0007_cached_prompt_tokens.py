"""rounds and simulations: cached_prompt_tokens, the prompt tokens LLM servers took from their
prefix cache (as they reported it; 0 when they do not)

Revision ID: 0007_cached_prompt_tokens
Revises: 0006_round_llm_requests
Create Date: 2026-12-03
"""

import sqlalchemy as sa

from alembic import op

revision = "0007_cached_prompt_tokens"
down_revision = "0006_round_llm_requests"
branch_labels = None
depends_on = None

TABLES = ("rounds", "simulations")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column(
                    "cached_prompt_tokens",
                    sa.BigInteger(),
                    nullable=False,
                    server_default=sa.text("0"),
                )
            )


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("cached_prompt_tokens")
