"""Stored simulation configs name their plugin: the guessing game's top-level `rule` and
`feedback` move into `plugin: {name: guess, params: {rule, feedback}}`, the form the manager
stores since simulations became plugins. (The manager still reads the older form: a config
file, a sweep's base or a client may send it.)

Revision ID: 0015_configs_name_their_plugin
Revises: 0014_worker_plugins
Create Date: 2026-12-05
"""

import json

import sqlalchemy as sa

from alembic import op

revision = "0015_configs_name_their_plugin"
down_revision = "0014_worker_plugins"
branch_labels = None
depends_on = None

MOVED = ("rule", "feedback")
BATCH = 1000
simulations = sa.table("simulations", sa.column("id", sa.Integer), sa.column("config", sa.JSON))


def _rewrite(change) -> None:
    bind = op.get_bind()
    after = 0
    while True:
        rows = bind.execute(
            sa.select(simulations.c.id, simulations.c.config)
            .where(simulations.c.id > after)
            .order_by(simulations.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        for sid, config in rows:
            config = json.loads(config) if isinstance(config, str) else config
            changed = change(dict(config or {}))
            if changed is not None:
                bind.execute(
                    simulations.update().where(simulations.c.id == sid).values(config=changed)
                )
        after = rows[-1][0]


def _to_plugin(config: dict) -> dict | None:
    if "plugin" in config or not any(key in config for key in MOVED):
        return None
    params = {key: config.pop(key) for key in MOVED if key in config}
    return {**config, "plugin": {"name": "guess", "params": params}}


def _to_top(config: dict) -> dict | None:
    plugin = config.get("plugin")
    if not isinstance(plugin, dict) or plugin.get("name") != "guess":
        return None
    config.pop("plugin")
    params = plugin.get("params") or {}
    return {**config, **{key: params[key] for key in MOVED if key in params}}


def upgrade() -> None:
    _rewrite(_to_plugin)


def downgrade() -> None:
    _rewrite(_to_top)
