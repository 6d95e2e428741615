"""The naive baseline for the synthetic benchmark: one process, one asyncio task per agent.

Each task waits latency_s (the stand-in for an LLM call) and picks a number, as in the paper's
synthetic benchmark. Run as `python -m bench.naive_asyncio AGENTS LATENCY`; prints seconds.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time


async def _agent(latency_s: float, rng: random.Random) -> float:
    await asyncio.sleep(latency_s)
    return rng.uniform(0.0, 100.0)


async def _round(agents: int, latency_s: float) -> float:
    rng = random.Random(7)
    started = time.perf_counter()
    values = await asyncio.gather(*(_agent(latency_s, rng) for _ in range(agents)))
    assert len(values) == agents
    return time.perf_counter() - started


def main() -> None:
    agents, latency_s = int(sys.argv[1]), float(sys.argv[2])
    try:  # the same event loop the workers use, so only the design differs
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        print(f"{runner.run(_round(agents, latency_s)):.3f}")


if __name__ == "__main__":
    main()
