"""Every host of a run can play its plugin, in the manager's version, and the policies other
packages add to it that the run plays: checked at launch, before anything is stored, from what
each worker reported at registration (name: version, plugin:policy: version). A host without
them, or with other versions, would fail or, worse, play other rules."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations import store as population_store
from backend.workers import registry
from backend.workers.schemas import LIVE_STATES
from populace.registry import Plugin, added_key

# Hosts named in a refusal at most (the rest are counted).
NAMED_HOSTS = 3


async def plugin_refusal(
    session: AsyncSession, population_id: int, plugin: Plugin, policies: Iterable[str] = ()
) -> str | None:
    """Why the live hosts of the population cannot play the plugin, or those of the run's
    `policies` that another package adds to it; None when they all can."""
    # What every host must report: (key, version, what the refusal calls it).
    needed = [(plugin.name, plugin.version, f"plugin {plugin.name!r} {plugin.version}")]
    for policy in sorted(set(policies) & set(plugin.added)):
        distribution, version = plugin.added[policy]
        what = f"policy {policy!r} of plugin {plugin.name!r} ({distribution} {version})"
        needed.append((added_key(plugin.name, policy), version, what))
    per_worker = await population_store.agents_per_worker(session, population_id)
    workers = await registry.by_ids(session, [w for w in per_worker if w is not None])
    live = [w for w in sorted(workers.values(), key=lambda w: w.id) if w.state in LIVE_STATES]
    for key, version, what in needed:  # a dead host's agents are re-placed on live ones
        lacking = []
        for worker in live:
            has = (worker.plugins or {}).get(key)
            if has == version:
                continue
            said = "has no such plugin" if has is None else f"has version {has}"
            if key != plugin.name:
                said = "has no such policy" if has is None else f"has its version {has}"
            lacking.append(f"worker {worker.id} ({worker.node}, {worker.address}) {said}")
        if lacking:
            named = "; ".join(lacking[:NAMED_HOSTS])
            if len(lacking) > NAMED_HOSTS:
                named += f"; and {len(lacking) - NAMED_HOSTS} more"
            return (
                f"{what} (the manager's) cannot run on every host of population "
                f"{population_id}: {named}; install that version on those nodes and restart "
                "their workers"
            )
    return None
