"""fault tolerance: worker identity, degraded populations, paused simulations, lost agents

Revision ID: 0004_fault_tolerance
Revises: 0003_simulations
Create Date: 2026-12-05
"""

import sqlalchemy as sa

from alembic import op

revision = "0004_fault_tolerance"
down_revision = "0003_simulations"
branch_labels = None
depends_on = None

ACTIVE_BEFORE = "status IN ('pending', 'running')"
ACTIVE_AFTER = "status IN ('pending', 'running', 'paused')"
POPULATION_BEFORE = "status IN ('deploying', 'deployed', 'failed', 'deleting', 'deleted')"
POPULATION_AFTER = (
    "status IN ('deploying', 'deployed', 'degraded', 'failed', 'deleting', 'deleted')"
)
SIMULATION_BEFORE = "status IN ('pending', 'running', 'completed', 'failed', 'cancelled')"
SIMULATION_AFTER = "status IN ('pending', 'running', 'paused', 'completed', 'failed', 'cancelled')"
DECISION_BEFORE = "status IN ('valid', 'invalid', 'late')"
DECISION_AFTER = "status IN ('valid', 'invalid', 'late', 'lost')"


def _swap_check(table: str, name: str, condition: str, **table_kwargs) -> None:
    # SQLite cannot alter a constraint: batch mode copies the table (keeping WITHOUT ROWID).
    with op.batch_alter_table(table, recreate="auto", table_kwargs=table_kwargs) as batch:
        batch.drop_constraint(name, type_="check")
        batch.create_check_constraint(name, condition)


def _active_index(condition: str) -> None:
    op.drop_index("ux_simulations_active_population", table_name="simulations")
    op.create_index(
        "ux_simulations_active_population",
        "simulations",
        ["population_id"],
        unique=True,
        sqlite_where=sa.text(condition),
        postgresql_where=sa.text(condition),
    )


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("slot", sa.Integer(), nullable=True))
    op.create_index("ix_workers_node_slot", "workers", ["node", "slot"])
    # The reaper looks for orphans on every worker every few seconds: with this partial index
    # that is a probe of (usually) nothing, not a walk over each worker's agents.
    op.create_index(
        "ix_agents_orphaned_worker",
        "agents",
        ["worker_id"],
        sqlite_where=sa.text("orphaned = 1"),
        postgresql_where=sa.text("orphaned = true"),
    )
    with op.batch_alter_table("populations") as batch:
        batch.add_column(
            sa.Column("hosted", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    # Every population deployed so far was whole when it was deployed.
    op.execute("UPDATE populations SET hosted = size WHERE status = 'deployed'")
    _swap_check("populations", "ck_populations_status", POPULATION_AFTER)
    with op.batch_alter_table("simulations") as batch:
        batch.add_column(sa.Column("pause_reason", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("lost_agents", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    _swap_check("simulations", "ck_simulations_status", SIMULATION_AFTER)
    _active_index(ACTIVE_AFTER)
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(
            sa.Column("n_lost", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    _swap_check("decisions", "ck_decisions_status", DECISION_AFTER, sqlite_with_rowid=False)


def downgrade() -> None:
    op.execute("DELETE FROM decisions WHERE status = 'lost'")
    _swap_check("decisions", "ck_decisions_status", DECISION_BEFORE, sqlite_with_rowid=False)
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("n_lost")
    op.execute("UPDATE simulations SET status = 'failed' WHERE status = 'paused'")
    _active_index(ACTIVE_BEFORE)
    _swap_check("simulations", "ck_simulations_status", SIMULATION_BEFORE)
    with op.batch_alter_table("simulations") as batch:
        batch.drop_column("lost_agents")
        batch.drop_column("pause_reason")
    op.execute("UPDATE populations SET status = 'deployed' WHERE status = 'degraded'")
    _swap_check("populations", "ck_populations_status", POPULATION_BEFORE)
    with op.batch_alter_table("populations") as batch:
        batch.drop_column("hosted")
    op.drop_index("ix_agents_orphaned_worker", table_name="agents")
    op.drop_index("ix_workers_node_slot", table_name="workers")
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("slot")
