"""run_events.published: the run timeline as an outbox

A run's timeline entries are written in the same transaction as the change they record (a
status, a kept round); `published` says whether the manager has announced the entry yet
(`timeline.added`, alerts). Entries already stored were announced by the timeline that wrote
them, so they start published.

Revision ID: 0023_timeline_outbox
Revises: 0022_placements_by_range
Create Date: 2026-12-07
"""

import sqlalchemy as sa

from alembic import op

revision = "0023_timeline_outbox"
down_revision = "0022_placements_by_range"
branch_labels = None
depends_on = None

_UNPUBLISHED = sa.text("NOT published")


def upgrade() -> None:
    op.add_column(
        "run_events",
        sa.Column("published", sa.Boolean(), nullable=False, server_default=sa.true()),
    )
    # The announcer reads the few unannounced entries, never the whole table.
    op.create_index(
        "ix_run_events_unpublished",
        "run_events",
        ["id"],
        sqlite_where=_UNPUBLISHED,
        postgresql_where=_UNPUBLISHED,
    )


def downgrade() -> None:
    op.drop_index("ix_run_events_unpublished", table_name="run_events")
    with op.batch_alter_table("run_events") as batch:
        batch.drop_column("published")
