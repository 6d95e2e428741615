"""The research workbench: per-endpoint LLM meters on rounds, the reproducibility record and
cancel reason on simulations, sweeps, and interviews of agents.

Revision ID: 0010_workbench
Revises: 0009_worker_labels
Create Date: 2026-12-03
"""

import sqlalchemy as sa

from alembic import op

revision = "0010_workbench"
down_revision = "0009_worker_labels"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(sa.Column("endpoints", sa.JSON(), nullable=False, server_default="[]"))
    with op.batch_alter_table("simulations") as batch:
        batch.add_column(sa.Column("cancel_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("record", sa.JSON(), nullable=False, server_default="{}"))
        batch.add_column(sa.Column("sweep_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("sweep_params", sa.JSON(), nullable=True))
    op.create_index("ix_simulations_sweep_id_id", "simulations", ["sweep_id", "id"])
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('running', 'completed', 'failed', 'cancelled')", name="ck_sweeps_status"
        ),
        sa.CheckConstraint("mode IN ('sequence', 'parallel')", name="ck_sweeps_mode"),
    )
    op.create_table(
        "interviews",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("simulation_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.BigInteger(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False, server_default=""),
        sa.Column("answer", sa.Text(), nullable=False, server_default=""),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("model", sa.String(255), nullable=False, server_default=""),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('answering', 'answered', 'failed')", name="ck_interviews_status"
        ),
    )
    op.create_index(
        "ix_interviews_agent_simulation_id", "interviews", ["agent_id", "simulation_id", "id"]
    )
    op.create_index("ix_interviews_simulation_id_id", "interviews", ["simulation_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_interviews_simulation_id_id", table_name="interviews")
    op.drop_index("ix_interviews_agent_simulation_id", table_name="interviews")
    op.drop_table("interviews")
    op.drop_table("sweeps")
    op.drop_index("ix_simulations_sweep_id_id", table_name="simulations")
    with op.batch_alter_table("simulations") as batch:
        batch.drop_column("sweep_params")
        batch.drop_column("sweep_id")
        batch.drop_column("record")
        batch.drop_column("cancel_reason")
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("endpoints")
