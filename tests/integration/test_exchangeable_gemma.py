"""Exchangeable agents with a real LLM: Gemma 3 270M on CPU through llama-cpp-python's server.
The answer distribution read once as a logprob tree (worker_server.llm.distribution) must be
the distribution of per-agent calls (worker_server.llm.answering.answer, the grammar and plain
temperature sampling) at temperature 1.0: a chi-square test at alpha 0.01. A choice between
named options is asked agent by agent, and the options' grammar holds every answer.

The prompt is the round's (the "plain" system prompt, the "basic" user prompt for round 1, the
2/3 rule) over the range 0..5 rather than 0..100: at T = 1 the model writes two decimals after
most integers, so the tree over 0..100 has ~1,000 prefixes to ask about (~0.7-1.4 s each on
this server, whose logprobs path sorts the 262k vocabulary in Python), against ~60 over 0..5.

The servers run with logprobs (logits_all): llama-cpp-python returns none without it.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import numpy as np
import pytest

from backend.llm_local import MODEL_ALIAS, default_threads, start_local_llm
from backend.simulations.config import RuleConfig
from backend.simulations.prompts import system_prompt, user_prompt
from tests.support import free_port
from tests.support_stats import chi_square, chi_square_p, pooled_bins
from worker_server.llm import LlmClient
from worker_server.llm.answering import AnswerSettings, answer
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.constraints import ChoiceConstraint
from worker_server.llm.distribution import can_read, read_distribution
from worker_server.llm.spec import EndpointSpec
from worker_server.llm.templates import fill

pytestmark = pytest.mark.timeout(900)
HIGH = 5.0
TEMPERATURE = 1.0
# Per-agent calls. Power: a copy of the distribution with its mean shifted by 5% of the range
# (5 points on 0..100, 0.25 here) moves its integer spikes (" 5" alone is ~10%) and its
# two-decimal grid across the pooled bins (~50 of them with N = 300, expected >= 5 each); the
# test computes the chi-square's noncentrality lambda = N sum (q - p)^2 / p for that copy and
# asserts the power at alpha 0.01 exceeds ~0.99 (normal approximation of the noncentral
# chi-square: mean dof + lambda, variance 2 (dof + 2 lambda)), and that the observed sample
# rejects it (with ~10% to spare at N = 300: a smaller N loses the power). N = 300 answers take
# ~2 minutes of one server's time on 2 CPU cores (~0.4 s each; the tree ~40 s): the fixture's
# two servers share them.
N = 300
ALPHA = 0.01


@pytest.fixture(scope="module")
def gemma(tmp_path_factory) -> list[str]:
    """Two servers of the same model and options, each on half the threads: a llama.cpp
    server answers one request at a time on its threads (one on 2 cores), so the agents' calls
    and the tree's requests, spread over both, keep every core busy."""
    data_dir = tmp_path_factory.mktemp("llm-data")
    threads = max(1, default_threads() // 2)
    with ExitStack() as stack:
        urls = []
        for _ in range(2):
            llm = start_local_llm(free_port(), data_dir=data_dir, threads=threads, logprobs=True)
            urls.append(stack.enter_context(llm).base_url)
        yield urls


def _route(client: LlmClient, urls: list[str]):
    return client.routes([EndpointSpec(u, MODEL_ALIAS, 2, server="llama_cpp") for u in urls])[
        MODEL_ALIAS
    ]


def critical_value(dof: int, alpha: float) -> float:
    low, high = 0.0, 10.0 * dof + 100
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if chi_square_p(middle, dof) > alpha else (low, middle)
    return high


async def test_the_tree_is_the_distribution_of_per_agent_answers(gemma):
    rule = RuleConfig(preset="2/3", min=0, max=HIGH)
    system = system_prompt("plain", rule)
    user = fill(user_prompt("basic", character=False), {"round": "1", "history": ""})
    settings = AnswerSettings(
        api="completions",
        answer_mode="basic",
        max_tokens=8,
        temperature=TEMPERATURE,
        timeout_s=600,
        max_retries=1,
        extraction_call=False,
        constraint=NumberConstraint.for_range(0, HIGH),
    )
    client = LlmClient()
    route = _route(client, gemma)
    try:
        d = await read_distribution(client, route, settings, system, user)
        assert d.ok, d.message
        print(
            f"tree: {d.requests} requests, {d.elapsed_s:.1f} s, {len(d.values)} values, "
            f"pruned {d.pruned_mass:.2e}, unlisted <= {d.unlisted_bound:.3f}, mean {d.mean():.3f}"
        )
        assert d.pruned_mass < 0.01
        answers = await asyncio.gather(
            *(answer(client, route, settings, system, user, seed=seed) for seed in range(N))
        )
    finally:
        await client.aclose()
    observed = np.array([a.value for a in answers])
    assert not any(a.error or a.late for a in answers)
    assert not np.isnan(observed).any()  # the grammar holds every answer to the range

    edges = pooled_bins(d.values, d.probabilities, N)
    statistic, dof, p = chi_square(observed, d.values, d.probabilities, edges)
    print(f"chi-square {statistic:.1f} on {dof} dof: p = {p:.3f}; observed mean {observed.mean()}")
    assert dof >= 5
    assert p > ALPHA, (statistic, dof, p)

    # The same test can fail: a copy of the distribution shifted by 5% of the range.
    shifted = d.values + 0.05 * HIGH
    _, _, p_shifted = chi_square(observed, shifted, d.probabilities, edges)
    print(f"shifted copy: p = {p_shifted:.2e}")
    assert p_shifted < ALPHA
    # ... and would with high power: its noncentrality with N draws against the tree's bins.
    kept = d.probabilities / d.probabilities.sum()
    p_bins = np.bincount(np.searchsorted(edges, d.values), kept, len(edges))[: len(edges)]
    q_bins = np.bincount(np.searchsorted(edges, shifted), kept, len(edges))[: len(edges)]
    noncentrality = N * float(np.sum((q_bins - p_bins) ** 2 / p_bins))
    sd = (2 * (dof + 2 * noncentrality)) ** 0.5
    print(
        f"shifted copy: noncentrality {noncentrality:.0f}, critical {critical_value(dof, ALPHA):.1f}"
    )
    assert dof + noncentrality - 2.33 * sd > critical_value(dof, ALPHA), noncentrality


async def test_a_choice_is_asked_agent_by_agent_and_the_grammar_holds_every_answer(gemma):
    # A word may be written through tokens outside the top-K lists (here most of the mass goes
    # through such paths), so a choice's distribution is not read as a tree: each agent asks,
    # under the llama.cpp grammar of the options, and every answer is one of them.
    heads_tails = ChoiceConstraint(("heads", "tails"))
    settings = AnswerSettings(
        api="completions", answer_mode="basic", max_tokens=4, temperature=TEMPERATURE,
        timeout_s=600, max_retries=1, extraction_call=False, constraint=heads_tails,
    )  # fmt: skip
    assert not can_read(settings)
    system = "You are a player in a game of chance."
    user = "A fair coin is about to be tossed. Call it: heads or tails?\nYour call:"
    client = LlmClient()
    route = _route(client, gemma)
    try:
        answers = await asyncio.gather(
            *(answer(client, route, settings, system, user, seed=seed) for seed in range(40))
        )
    finally:
        await client.aclose()
    assert not any(a.error or a.late for a in answers)
    assert {a.text.strip() for a in answers} <= {"heads", "tails"}, [a.text for a in answers]
    assert [a.value for a in answers] == [float(a.text.strip() == "tails") for a in answers]
