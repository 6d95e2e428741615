"""placements: where agents are placed, by id ranges instead of a column per agent

Each population's agents are placed by runs of consecutive ids on a worker (a handful of rows),
so re-placing half of 10^6 agents rewrites a few ranges instead of 500,000 agent rows and every
index on them. The ranges are built from agents.worker_id and agents.orphaned (runs of
consecutive ids sharing both), then those columns and their indexes go.

Revision ID: 0022_placements_by_range
Revises: 0021_group_metrics
Create Date: 2026-12-07
"""

import sqlalchemy as sa

from alembic import op

revision = "0022_placements_by_range"
down_revision = "0021_group_metrics"
branch_labels = None
depends_on = None

# Runs of consecutive ids with the same worker and orphan flag: within a run, id minus the
# agent's rank among its (population, worker, flag) rows is constant.
_RANGES_FROM_AGENTS = """
INSERT INTO placements (population_id, start, stop, worker_id, orphaned)
SELECT population_id, MIN(id), MAX(id) + 1, worker_id, orphaned
FROM (
    SELECT id, population_id, worker_id, orphaned,
           id - ROW_NUMBER() OVER (
               PARTITION BY population_id, worker_id, orphaned ORDER BY id
           ) AS run
    FROM agents
) AS ranked
GROUP BY population_id, worker_id, orphaned, run
"""

_AGENTS_FROM_RANGES = """
UPDATE agents SET
    worker_id = (SELECT p.worker_id FROM placements p WHERE p.population_id = agents.population_id
                 AND p.start <= agents.id AND p.stop > agents.id),
    orphaned = COALESCE((SELECT p.orphaned FROM placements p
                         WHERE p.population_id = agents.population_id
                         AND p.start <= agents.id AND p.stop > agents.id), {false})
"""


def upgrade() -> None:
    op.create_table(
        "placements",
        sa.Column("population_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("start", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("stop", sa.BigInteger(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("orphaned", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.PrimaryKeyConstraint("population_id", "start"),
    )
    op.create_index("ix_placements_worker_id", "placements", ["worker_id"])
    op.execute(_RANGES_FROM_AGENTS)
    op.drop_index("ix_agents_orphaned_worker", table_name="agents")
    op.drop_index("ix_agents_worker_id_id", table_name="agents")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("orphaned")
        batch.drop_column("worker_id")


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("worker_id", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("orphaned", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    false = "false" if op.get_bind().dialect.name == "postgresql" else "0"
    op.execute(_AGENTS_FROM_RANGES.format(false=false))
    op.create_index("ix_agents_worker_id_id", "agents", ["worker_id", "id"])
    op.create_index(
        "ix_agents_orphaned_worker",
        "agents",
        ["worker_id"],
        sqlite_where=sa.text("orphaned = 1"),
        postgresql_where=sa.text("orphaned = true"),
    )
    op.drop_index("ix_placements_worker_id", table_name="placements")
    op.drop_table("placements")
