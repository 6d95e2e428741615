"""How many LLM requests agents with one prompt cost: one owner for the workers and the estimate.

The workers' LLM policy (worker_server.rounds.llm) answers a cohort's agents by these rules, and
the manager's estimate of a run (backend.simulations.estimate) counts requests with the same
ones, so the two cannot drift apart:

- `answering_mode`: whether agents whose whole prompt is identical each ask ("per_agent"), share
  one answer ("shared", temperature 0: greedy decoding gives each of them that answer anyway),
  or draw from one read of the prompt's answer distribution ("exchangeable").
- `prompt_cost`: what a prompt shared by n agents of one cohort costs in each mode: agents that
  send it (asks) and distribution reads. What one read costs in requests is the tree's
  (worker_server.llm.distribution.read_requests_at_most).

Plain functions and constants only: the manager imports them without the worker's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AnsweringMode = Literal["per_agent", "shared", "exchangeable"]
# Exchangeable mode: a prompt that at most this many agents of a cohort share is asked by each
# of them; one that more share is read. Reading costs a dozen or more requests, so a prompt few
# agents share is cheaper asked for.
ASK_BEFORE_READING = 8


def readable(api: str, answer_mode: str, spelled_by_top_tokens: bool) -> bool:
    """Whether answers' distribution can be read as a logprob tree: completions (a prefix can
    follow the prompt), basic (constrained) answers, and answers the top-K lists spell out
    (numbers; see distribution.can_read)."""
    return api == "completions" and answer_mode == "basic" and spelled_by_top_tokens


def answering_mode(temperature: float, each_agent_asks: bool, readable: bool) -> AnsweringMode:
    """How agents with identical prompts are answered. `readable`: the answers' distribution
    can be read as a logprob tree (`readable` above)."""
    if each_agent_asks:
        return "per_agent"
    if temperature == 0:
        return "shared"
    return "exchangeable" if readable else "per_agent"


@dataclass(frozen=True)
class PromptCost:
    asks: int  # agents that send the prompt (each one prompt of a request)
    reads: int  # reads of the prompt's answer distribution (0 or 1)


def prompt_cost(mode: AnsweringMode, agents: int) -> PromptCost:
    """What one prompt costs in a cohort where `agents` agents have it. Exchangeable: up to
    ASK_BEFORE_READING agents each ask; past that the prompt is read once (for the whole cluster,
    worker_server.llm.shared_reads) and every agent draws from it."""
    if agents <= 0:
        return PromptCost(0, 0)
    if mode == "shared":
        return PromptCost(1, 0)
    if mode == "exchangeable":
        if agents > ASK_BEFORE_READING:
            return PromptCost(0, 1)
        return PromptCost(agents, 0)
    return PromptCost(agents, 0)
