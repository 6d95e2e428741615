"""decisions partitioned by simulation on PostgreSQL (LIST on simulation_id): one partition per
simulation, created with it and dropped with it, so deleting a simulation's decisions is a DROP
TABLE and a round's COPY updates one partition's primary key. SQLite keeps one table.

Revision ID: 0008_decisions_by_simulation
Revises: 0007_cached_prompt_tokens
Create Date: 2026-12-03
"""

import sqlalchemy as sa

from alembic import op

revision = "0008_decisions_by_simulation"
down_revision = "0007_cached_prompt_tokens"
branch_labels = None
depends_on = None

COLUMNS = """
    simulation_id INTEGER NOT NULL,
    round INTEGER NOT NULL,
    agent_id BIGINT NOT NULL,
    value DOUBLE PRECISION,
    status VARCHAR(8) NOT NULL,
    response TEXT,
    CONSTRAINT ck_decisions_status CHECK (status IN ('valid', 'invalid', 'late', 'lost')),
    PRIMARY KEY (simulation_id, round, agent_id)
"""


def _simulation_ids() -> list[int]:
    rows = op.get_bind().execute(sa.text("SELECT id FROM simulations ORDER BY id"))
    return [int(row[0]) for row in rows]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE decisions RENAME TO decisions_unpartitioned")
    # Index names are per schema: the new table's primary key takes the old one's name.
    op.execute("ALTER INDEX decisions_pkey RENAME TO decisions_unpartitioned_pkey")
    op.execute(f"CREATE TABLE decisions ({COLUMNS}) PARTITION BY LIST (simulation_id)")
    for simulation_id in _simulation_ids():
        op.execute(
            f"CREATE TABLE decisions_{simulation_id} PARTITION OF decisions "
            f"FOR VALUES IN ({simulation_id})"
        )
    op.execute("INSERT INTO decisions SELECT * FROM decisions_unpartitioned")
    op.execute("DROP TABLE decisions_unpartitioned")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE decisions RENAME TO decisions_partitioned")
    op.execute("ALTER INDEX decisions_pkey RENAME TO decisions_partitioned_pkey")
    op.execute(f"CREATE TABLE decisions ({COLUMNS})")
    op.execute("INSERT INTO decisions SELECT * FROM decisions_partitioned")
    op.execute("DROP TABLE decisions_partitioned")  # and every partition with it
