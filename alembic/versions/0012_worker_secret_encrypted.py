"""Workers' RPC secrets sealed with the manager's key, never stored in the clear; deleted
populations host nothing.

The key is the manager's (backend.workers.secret_box), which a migration does not have, so the
plaintext secrets are dropped rather than sealed here: when the manager starts it finds no
secret it can open for those workers, replaces their leases, and their next heartbeat makes
them register again (same ids, same agents) with a secret it seals. A downgrade cannot give the
secrets back either: it replaces the leases too, so the workers register again with the older
manager and it stores their secrets as that version did.

Revision ID: 0012
Revises: 0011_run_events
Create Date: 2026-12-05
"""

import secrets

import sqlalchemy as sa

from alembic import op

revision = "0012"
down_revision = "0011_run_events"
branch_labels = None
depends_on = None

_workers = sa.table(
    "workers", sa.column("id", sa.Integer), sa.column("lease", sa.String), sa.column("state")
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # The table is copied and the old one dropped: zero its pages rather than leave the
        # plaintext secrets in the file's free space.
        op.execute("PRAGMA secure_delete = ON")
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("rpc_secret_sealed", sa.String(512), nullable=True))
        batch.drop_column("rpc_secret")
    # A deleted population (or an undone deploy) has no agents left: none is hosted.
    op.execute("UPDATE populations SET hosted = 0 WHERE status IN ('deleted', 'failed')")


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("rpc_secret", sa.String(256), nullable=True))
        batch.drop_column("rpc_secret_sealed")
    _register_again()


def _register_again() -> None:
    """A fresh lease for every worker that is not removed: its next heartbeat is a 409, and it
    registers again (bringing its secret)."""
    conn = op.get_bind()
    ids = conn.execute(sa.select(_workers.c.id).where(_workers.c.state != "removed")).scalars()
    for worker_id in list(ids):
        conn.execute(
            _workers.update().where(_workers.c.id == worker_id).values(lease=secrets.token_hex(16))
        )
