"""Run timelines: what happened to each simulation run, and when (backend.simulations.timeline).

Revision ID: 0011_run_events
Revises: 0010_workbench
Create Date: 2026-12-04
"""

import sqlalchemy as sa

from alembic import op

revision = "0011_run_events"
down_revision = "0010_workbench"
branch_labels = None
depends_on = None

RUN_EVENT_KINDS = (
    "launched",
    "started",
    "round",
    "fault",
    "paused",
    "resumed",
    "cancelled",
    "failed",
    "completed",
)


def upgrade() -> None:
    op.create_table(
        "run_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("simulation_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False, server_default="{}"),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(f"kind IN {RUN_EVENT_KINDS!r}", name="ck_run_events_kind"),
    )
    op.create_index("ix_run_events_simulation_id_id", "run_events", ["simulation_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_run_events_simulation_id_id", table_name="run_events")
    op.drop_table("run_events")
