"""simulations, their rounds and decisions

Revision ID: 0003_simulations
Revises: 0002_populations
Create Date: 2026-12-04
"""

import sqlalchemy as sa

from alembic import op

revision = "0003_simulations"
down_revision = "0002_populations"
branch_labels = None
depends_on = None

ACTIVE = "status IN ('pending', 'running')"


def upgrade() -> None:
    # No foreign keys to populations: see backend.db.models.Simulation (results outlive agents).
    op.create_table(
        "simulations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("population_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("current_round", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("models", sa.JSON(), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("stop_reason", sa.String(64), nullable=True),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'completed', 'failed', 'cancelled')",
            name="ck_simulations_status",
        ),
    )
    op.create_index("ix_simulations_population_id_id", "simulations", ["population_id", "id"])
    op.create_index(
        "ux_simulations_active_population",
        "simulations",
        ["population_id"],
        unique=True,
        sqlite_where=sa.text(ACTIVE),
        postgresql_where=sa.text(ACTIVE),
    )
    op.create_table(
        "rounds",
        sa.Column("simulation_id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("round", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("n_valid", sa.BigInteger(), nullable=False),
        sa.Column("n_invalid", sa.BigInteger(), nullable=False),
        sa.Column("n_late", sa.BigInteger(), nullable=False),
        sa.Column("mean", sa.Float(), nullable=True),
        sa.Column("median", sa.Float(), nullable=True),
        sa.Column("std", sa.Float(), nullable=True),
        sa.Column("min", sa.Float(), nullable=True),
        sa.Column("max", sa.Float(), nullable=True),
        sa.Column("target", sa.Float(), nullable=True),
        sa.Column("winner_value", sa.Float(), nullable=True),
        sa.Column("winner_count", sa.BigInteger(), nullable=False),
        sa.Column("winner_agents", sa.JSON(), nullable=False),
        sa.Column("histogram", sa.JSON(), nullable=False),
        sa.Column("segments", sa.JSON(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("llm_errors", sa.BigInteger(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "decisions",
        sa.Column("simulation_id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("round", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("agent_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("response", sa.Text(), nullable=True),
        sa.CheckConstraint("status IN ('valid', 'invalid', 'late')", name="ck_decisions_status"),
        # Rows stored in the primary key's b-tree (see backend.db.models.Decision).
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("decisions")
    op.drop_table("rounds")
    op.drop_index("ux_simulations_active_population", table_name="simulations")
    op.drop_index("ix_simulations_population_id_id", table_name="simulations")
    op.drop_table("simulations")
