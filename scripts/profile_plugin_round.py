"""Counts Python calls while a plugin plays 3 rounds at 10^6 agents with its default rule-based
policy: the workers' round code (two in-process workers, tests/unit/test_global_environment.py's
InProcessWorker, no sockets) and the manager's resolve. A per-agent Python call on the hot path
would show as a function called >= 10^6 times. Prints one JSON line per plugin.

    .venv/bin/python scripts/profile_plugin_round.py [PLUGIN ...]
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit import test_global_environment as env_tests  # noqa: E402

AGENTS = 1_000_000
ROUNDS = 3


async def _play(plugin: str) -> int:
    env, kept, _ = env_tests._environment(
        2, plugin={"name": plugin, "params": {}}, policy=None, rounds=ROUNDS
    )
    await env.run()
    return len(kept.rounds)


def main(plugins: list[str]) -> None:
    env_tests.SIZE = AGENTS
    for plugin in plugins or ["public_goods", "el_farol"]:
        profile = cProfile.Profile()
        profile.enable()
        played = asyncio.run(_play(plugin))
        profile.disable()
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        busiest = sorted(((v[1], k) for k, v in stats.items()), reverse=True)[:3]
        print(
            json.dumps(
                {
                    "plugin": plugin,
                    "agents": AGENTS,
                    "rounds": played,
                    "most_called": [
                        {"calls": calls, "function": f"{Path(key[0]).name}:{key[2]}"}
                        for calls, key in busiest
                    ],
                }
            )
        )


if __name__ == "__main__":
    main(sys.argv[1:])
