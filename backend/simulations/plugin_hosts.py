"""Every host of a run can play its plugin, in the manager's version: checked at launch, before
anything is stored, from what each worker reported at registration (name: version). A host
without the plugin, or with another version, would fail or, worse, play other rules."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations import store as population_store
from backend.workers import registry
from backend.workers.schemas import LIVE_STATES
from populace.registry import Plugin

# Hosts named in a refusal at most (the rest are counted).
NAMED_HOSTS = 3


async def plugin_refusal(session: AsyncSession, population_id: int, plugin: Plugin) -> str | None:
    """Why the live hosts of the population cannot play the plugin; None when they all can."""
    per_worker = await population_store.agents_per_worker(session, population_id)
    workers = await registry.by_ids(session, [w for w in per_worker if w is not None])
    lacking = []
    for worker in sorted(workers.values(), key=lambda w: w.id):
        if worker.state not in LIVE_STATES:
            continue  # a dead host's agents are re-placed on live ones
        has = (worker.plugins or {}).get(plugin.name)
        if has == plugin.version:
            continue
        what = "has no such plugin" if has is None else f"has version {has}"
        lacking.append(f"worker {worker.id} ({worker.node}, {worker.address}) {what}")
    if not lacking:
        return None
    named = "; ".join(lacking[:NAMED_HOSTS])
    if len(lacking) > NAMED_HOSTS:
        named += f"; and {len(lacking) - NAMED_HOSTS} more"
    return (
        f"plugin {plugin.name!r} {plugin.version} (the manager's) cannot run on every host of "
        f"population {population_id}: {named}; install that version on those nodes and restart "
        "their workers"
    )
