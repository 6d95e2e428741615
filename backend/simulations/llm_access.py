"""Before a launch: would the workers call this config's LLM endpoints at all?

Each worker decides by itself which LLM hosts it calls (POPULACE_LLM_ALLOWED_HOSTS) and holds
the API keys (api_key_env names a variable on the worker). The launch route asks every live
worker hosting the population (ProbeLlm with check_only: nothing is sent to the endpoints) and
refuses the config with a 422 naming the endpoint field, the worker and its reason, rather than
accepting a run that fails before its first round. Workers that do not answer in time are left
to the run (it waits for them, or re-places their agents); reachability of the endpoints is
still probed by the run itself before round 1.
"""

from __future__ import annotations

import asyncio
import logging

from backend.simulations.config import SimulationConfig
from backend.simulations.runner import live_hosts
from backend.simulations.spec import llm_policy
from backend.workers.grpc_client import WorkerClient
from backend.workers.plane_errors import Field, WorkerPlaneError, WorkerRefused, field_path

log = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 5.0
ERROR_TYPE = "llm_access"
Loc = tuple[str | int, ...]


def _loc(field: Field, index: int | None = None) -> Loc:
    """Where the problem is, as pydantic would name it (the policy's kind included): the
    endpoint field the worker named (("endpoints", 0, "base_url")); naming none, endpoint
    `index`'s base URL, or the endpoints as a whole."""
    if field:
        return ("body", "policy", "llm", *field)
    if index is None:
        return ("body", "policy", "llm", "endpoints")
    return ("body", "policy", "llm", "endpoints", index, "base_url")


async def _ask(address: str, endpoints: list, timeout_s: float) -> list[tuple[Loc, str]]:
    try:
        async with asyncio.timeout(timeout_s), WorkerClient(address) as client:
            reply = await client.probe_llm(endpoints, timeout_s=timeout_s, check_only=True)
    except WorkerRefused as exc:
        return [(_loc(exc.field), f"worker {address} refuses: {exc.message}")]
    except WorkerPlaneError as exc:
        log.info("pre-launch LLM check: worker %s did not answer: %s", address, exc.code())
        return []
    except TimeoutError:
        log.info("pre-launch LLM check: worker %s did not answer in time", address)
        return []
    problems = []
    for i, status in enumerate(reply.endpoints):
        if not status.ok:
            loc = _loc(field_path(status.error_field), i)
            problems.append((loc, f"worker {address}: {status.error}"))
    return problems


async def llm_access_problems(
    sessionmaker, config: SimulationConfig, timeout_s: float = CHECK_TIMEOUT_S
) -> list[dict]:
    """422 error entries ({type, loc, msg}), one per endpoint field; [] when the workers would
    call every endpoint (or the policy uses no LLM)."""
    policy = config.llm_policy  # a mixed policy's LLM part is checked like a plain one
    if policy is None:
        return []
    endpoints = list(llm_policy(config, policy).endpoints)
    async with sessionmaker() as session:
        hosts = await live_hosts(session, config.population_id)
    found = await asyncio.gather(*(_ask(address, endpoints, timeout_s) for address in hosts))
    by_loc: dict[Loc, list[str]] = {}
    for loc, message in (problem for problems in found for problem in problems):
        by_loc.setdefault(loc, []).append(message)
    errors = []
    for loc, messages in by_loc.items():
        msg = messages[0]
        if len(messages) > 1:
            msg += f" (and {len(messages) - 1} more workers)"
        errors.append({"type": ERROR_TYPE, "loc": loc, "msg": msg, "input": None})
    return errors
