"""Rounds keep their declared metrics generically, `rounds.metrics` = {name: value}, beside the
guessing game's columns; rounds kept before this get theirs from those columns.

The names are written out here rather than read from backend.simulations.metrics_declared: a
migration must do the same thing whatever that list becomes later.

Revision ID: 0013_round_metrics
Revises: 0012
Create Date: 2026-12-06
"""

import sqlalchemy as sa

from alembic import op

revision = "0013_round_metrics"
down_revision = "0012"
branch_labels = None
depends_on = None

# Each metric of the guessing game is the column of the same name.
NUMBER_METRICS = ("mean", "median", "std", "min", "max", "target", "winner_value")
INTEGER_METRICS = ("winner_count", "n_valid", "n_invalid")


def _sqlite_number(column: str) -> str:
    # json_object writes a REAL with 15 digits, which loses the last bits; '%!.17g' is exact
    # (the '!' lifts SQLite's 16-digit cap), and json() embeds the text as a number.
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE json(printf('%!.17g', {column})) END"


def _metrics_object(dialect: str) -> str:
    if dialect == "sqlite":
        pairs = [f"'{m}', {_sqlite_number(m)}" for m in NUMBER_METRICS]
        pairs += [f"'{m}', {m}" for m in INTEGER_METRICS]
        return f"json_object({', '.join(pairs)})"
    # PostgreSQL writes float8 as its shortest exact text (12+), ints as they are.
    pairs = [f"'{m}', {m}" for m in NUMBER_METRICS + INTEGER_METRICS]
    return f"json_build_object({', '.join(pairs)})"


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(sa.Column("metrics", sa.JSON(), nullable=True))
    # One set-based statement, so a large store is filled in one pass, inside the migration's
    # transaction (all rounds or none).
    dialect = op.get_bind().dialect.name
    op.execute(f"UPDATE rounds SET metrics = {_metrics_object(dialect)} WHERE metrics IS NULL")


def downgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("metrics")
