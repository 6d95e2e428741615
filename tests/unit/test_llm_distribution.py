"""Reading a prompt's answer distribution once (worker_server.llm.distribution), against a real
HTTP server: bench.openai_server in vLLM mode with its toy language model, whose answers are
sampled from the very next-token distributions its logprobs report. The tree's distribution is
compared with an independent enumeration of the toy model (exact), and with per-agent answers
(a chi-square test)."""

from __future__ import annotations

import asyncio
import itertools
import math
import re

import numpy as np
import pytest

from bench.openai_server import OpenAIServer, toy_allowed, toy_logprobs
from tests.support_stats import chi_square, chi_square_p, pooled_bins
from worker_server.llm import LlmClient
from worker_server.llm.answering import AnswerSettings, answer
from worker_server.llm.answers import NumberConstraint, parse_basic
from worker_server.llm.distribution import (
    AnswerDistribution,
    can_read,
    read_distribution,
)
from worker_server.llm.spec import EndpointSpec

MODEL = "test-model"
SYSTEM = "You are playing a game."
USER = "Pick a number.\nAnswer:"


# -- statistics (no scipy in the project) --------------------------------------------------------


def test_chi_square_p_values():
    assert chi_square_p(3.841459, 1) == pytest.approx(0.05, abs=1e-6)
    assert chi_square_p(6.634897, 1) == pytest.approx(0.01, abs=1e-6)
    assert chi_square_p(18.307038, 10) == pytest.approx(0.05, abs=1e-6)
    assert chi_square_p(2.0, 10) == pytest.approx(0.996340, abs=1e-6)
    assert chi_square_p(100.0, 50) == pytest.approx(3.6e-5, rel=0.05)


# -- the constraint's prefixes -------------------------------------------------------------------


@pytest.mark.parametrize("integers", [False, True])
@pytest.mark.parametrize("low,high", [(0, 100), (20, 35), (0, 7.25), (-5, 50), (0, 2e9)])
def test_is_prefix_is_exactly_the_prefixes_of_accepted_answers(low, high, integers):
    constraint = NumberConstraint.for_range(low, high, integers)
    alphabet = " 02359.-"  # the digits at the edges of the ranges, and one of each other kind
    whole = {
        "".join(t)
        for n in range(6)
        for t in itertools.product(alphabet, repeat=n)
        if constraint.accepts("".join(t))
    }
    prefixes = {w[:i] for w in whole for i in range(len(w) + 1)}
    for n in range(5):
        for t in itertools.product(alphabet, repeat=n):
            text = "".join(t)
            assert constraint.is_prefix(text) == (text in prefixes), text
    assert (
        constraint.accepts(f" {max(int(low), 0)}")
        and not constraint.accepts(" ")
        and not constraint.accepts("")
    )


# -- drawing -------------------------------------------------------------------------------------


def distribution(values, probabilities, pruned=0.0) -> AnswerDistribution:
    return AnswerDistribution(
        values=np.array(values, dtype=float),
        probabilities=np.array(probabilities, dtype=float),
        pruned_mass=pruned,
        unlisted_bound=0.0,
        requests=1,
        nodes=1,
        texts=tuple(f"{v:g}" for v in values),
    )


def test_draw_is_the_inverse_cdf_renormalised_over_the_kept_mass():
    d = distribution([1.0, 2.5, 7.0], [0.2, 0.2, 0.4], pruned=0.2)  # kept: 1/4, 1/4, 1/2
    u = np.array([[0.0, 0.2499, 0.25], [0.4999, 0.5, 0.9999]])
    assert d.draw(u).tolist() == [[1.0, 1.0, 2.5], [2.5, 7.0, 7.0]]
    rng = np.random.default_rng(1)
    u = rng.random(100_000)
    drawn = d.draw(u)
    expected = [1.0 if x < 0.25 else 2.5 if x < 0.5 else 7.0 for x in u]
    assert drawn.tolist() == expected
    assert d.text_of(2.5) == "2.5"
    assert d.mean() == pytest.approx(0.25 * 1 + 0.25 * 2.5 + 0.5 * 7)
    with pytest.raises(KeyError):
        d.text_of(3.0)


def test_a_failed_read_draws_nan():
    failed = AnswerDistribution(np.empty(0), np.empty(0), 1.0, math.nan, 0, 0, error=True)
    assert not failed.ok
    assert np.isnan(failed.draw(np.array([0.1, 0.9]))).all()


def settings(
    temperature: float, high: float = 3, timeout_s: float = 30.0, integers: bool = False
) -> AnswerSettings:
    return AnswerSettings(
        api="completions",
        answer_mode="basic",
        max_tokens=16,
        temperature=temperature,
        timeout_s=timeout_s,
        max_retries=0,
        extraction_call=False,
        constraint=NumberConstraint.for_range(0, high, integers),
    )


def test_only_basic_completions_can_be_read():
    assert can_read(settings(1.0))
    cot = AnswerSettings("completions", "cot", 16, 1.0, 10, 0, False, settings(1).constraint)
    chat = AnswerSettings("chat", "basic", 16, 1.0, 10, 0, False, settings(1).constraint)
    assert not can_read(cot) and not can_read(chat)


# -- against the toy model -----------------------------------------------------------------------


def enumerate_toy(prompt: str, constraint: NumberConstraint, temperature: float) -> dict:
    """The toy model's constrained answer distribution {value: p}, by enumeration (using the
    server's own regex test, not NumberConstraint.is_prefix)."""
    pattern = re.compile(constraint.regex)
    out: dict[float, float] = {}

    def walk(text: str, mass: float) -> None:
        allowed = {
            t: lp for t, lp in toy_logprobs(prompt + text).items() if toy_allowed(pattern, text, t)
        }
        top = max(allowed.values())
        weights = {t: math.exp((lp - top) / temperature) for t, lp in allowed.items()}
        total = sum(weights.values())
        for token, w in weights.items():
            if token == "<eos>":
                value = parse_basic(text)
                out[value] = out.get(value, 0.0) + mass * w / total
            else:
                walk(text + token, mass * w / total)

    walk("", 1.0)
    return out


@pytest.fixture
def toy_server():
    with OpenAIServer(model=MODEL, validate="vllm") as server:
        server.behaviour.toy_lm = True
        yield server


@pytest.fixture
async def client():
    c = LlmClient(backoff_base_s=0.01)
    yield c
    await c.aclose()


def route_of(client, server, cap=4, batch_size=1):
    spec = EndpointSpec(server.base_url, MODEL, cap, server="vllm", batch_size=batch_size)
    return client.routes([spec])[MODEL]


@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.5])
async def test_the_tree_is_the_enumerated_distribution(toy_server, client, temperature):
    """Exact: invalid tokens (" " after a digit, "x", "\\n", "-", "12" past the range) are
    dropped, the end counts only after a whole answer, the temperature applies over what is
    kept, and nothing is pruned."""
    s = settings(temperature)
    d = await read_distribution(
        client, route_of(client, toy_server), s, SYSTEM, USER, prune_below=0.0, max_nodes=10_000
    )
    assert d.ok and d.pruned_mass == 0.0 and d.unlisted_bound == pytest.approx(0.0)
    exact = enumerate_toy(f"{SYSTEM}\n\n{USER}", s.constraint, temperature)
    assert d.values.tolist() == sorted(exact)
    assert d.probabilities == pytest.approx([exact[v] for v in sorted(exact)], abs=1e-12)
    assert d.probabilities.sum() == pytest.approx(1.0)
    # Whole answers nothing can extend (x.yz, 3) cost no request.
    assert d.requests == d.nodes < len(d.values)
    assert d.requests == toy_server.requests
    assert all(s.constraint.accepts(d.text_of(v)) for v in d.values)


async def test_integer_answers_are_read_with_a_few_requests(toy_server, client):
    """Whole numbers only: the same exact distribution over the integers, from far fewer
    prefixes than with two decimals allowed."""
    whole, decimal = settings(1.0, high=12, integers=True), settings(1.0, high=12)
    route = route_of(client, toy_server)
    d = await read_distribution(client, route, whole, SYSTEM, USER, prune_below=0.0)
    assert d.ok and d.pruned_mass == 0.0
    exact = enumerate_toy(f"{SYSTEM}\n\n{USER}", whole.constraint, 1.0)
    assert d.values.tolist() == sorted(exact) and all(v == int(v) for v in exact)
    assert d.probabilities == pytest.approx([exact[v] for v in sorted(exact)], abs=1e-12)
    with_decimals = await read_distribution(
        client, route, decimal, SYSTEM, USER, prune_below=0.0, max_nodes=10_000
    )
    assert d.requests * 5 < with_decimals.requests


async def test_batched_reads_give_the_same_distribution(toy_server, client):
    s = settings(1.0)
    one = await read_distribution(client, route_of(client, toy_server), s, SYSTEM, USER)
    batched = await read_distribution(
        client, route_of(client, toy_server, batch_size=16), s, SYSTEM, USER
    )
    assert batched.values.tolist() == one.values.tolist()
    assert batched.probabilities == pytest.approx(one.probabilities, abs=1e-12)
    assert batched.requests < one.requests and batched.nodes == one.nodes


async def test_pruning_is_accounted_for(toy_server, client):
    s = settings(1.0, high=20)
    full = await read_distribution(
        client, route_of(client, toy_server), s, SYSTEM, USER, prune_below=0.0, max_nodes=10_000
    )
    pruned = await read_distribution(
        client, route_of(client, toy_server), s, SYSTEM, USER, prune_below=0.01
    )
    capped = await read_distribution(
        client, route_of(client, toy_server), s, SYSTEM, USER, prune_below=0.0, max_nodes=15
    )
    assert full.pruned_mass == 0.0 and full.probabilities.sum() == pytest.approx(1.0)
    for d in (pruned, capped):
        assert 0 < d.pruned_mass < 1 and d.requests < full.requests
        assert d.probabilities.sum() + d.pruned_mass == pytest.approx(1.0)
        # What is kept is the full distribution's, less what lies under the pruned prefixes.
        kept = dict(zip(full.values.tolist(), full.probabilities.tolist(), strict=True))
        for value, p in zip(d.values.tolist(), d.probabilities.tolist(), strict=True):
            assert p <= kept[value] + 1e-12
    assert capped.nodes == 15


async def test_per_agent_answers_follow_the_distribution(toy_server, client):
    """The tree against what the server samples per agent (seeded, so the outcome is fixed)."""
    s = settings(0.8, high=20)
    route = route_of(client, toy_server, cap=16)
    d = await read_distribution(client, route, s, SYSTEM, USER, prune_below=1e-6)
    assert d.ok and d.pruned_mass < 1e-3
    answers = await asyncio.gather(
        *(answer(client, route, s, SYSTEM, USER, seed=seed) for seed in range(2000))
    )
    observed = np.array([a.value for a in answers])
    assert not np.isnan(observed).any()
    edges = pooled_bins(d.values, d.probabilities, len(observed))
    _, dof, p = chi_square(observed, d.values, d.probabilities, edges)
    assert dof >= 10 and p > 0.01
    # The same test rejects a distribution a little off: the values shifted by 1 (5% of 0..20).
    _, _, p_shifted = chi_square(observed, d.values + 1.0, d.probabilities, edges)
    assert p_shifted < 0.01
    # Agents drawing with their own uniforms: their sample passes too.
    drawn = d.draw(np.random.default_rng(7).random(2000))
    assert chi_square(drawn, d.values, d.probabilities, edges)[2] > 0.01


async def test_temperature_zero_is_the_greedy_answer(toy_server, client):
    s = settings(0.0, high=20)
    route = route_of(client, toy_server)
    d = await read_distribution(client, route, s, SYSTEM, USER)
    one = await answer(client, route, s, SYSTEM, USER, seed=3)
    assert d.values.tolist() == [one.value] and d.probabilities.tolist() == [1.0]
    assert d.requests <= len(one.text) + 1


async def test_a_failing_server_makes_an_error_and_a_slow_one_late(toy_server, client):
    route = route_of(client, toy_server)
    toy_server.configure(fail_rate=1.0, toy_lm=True)
    failed = await read_distribution(client, route, settings(1.0), SYSTEM, USER)
    assert failed.error and not failed.late and not failed.ok and failed.values.size == 0
    toy_server.configure(latency_s=0.5, toy_lm=True)
    late = await read_distribution(client, route, settings(1.0, timeout_s=0.2), SYSTEM, USER)
    assert late.late and not late.error and not late.ok
    assert np.isnan(late.draw(np.array([0.5]))).all()


async def test_a_short_top_list_is_accounted_for(toy_server, client):
    """With the top 3 only, valid continuations go unlisted: the bound says so (T <= 1; there is
    none above), and mass at prefixes with no valid listed continuation counts as pruned."""
    route = route_of(client, toy_server)
    d = await read_distribution(
        client, route, settings(0.8, high=20), SYSTEM, USER, prune_below=0.0, top_logprobs=3
    )
    assert d.ok and 0 < d.unlisted_bound <= 1
    assert d.probabilities.sum() + d.pruned_mass == pytest.approx(1.0)
    hot = await read_distribution(
        client, route, settings(1.5, high=20), SYSTEM, USER, prune_below=0.0, top_logprobs=3
    )
    assert math.isnan(hot.unlisted_bound)
    assert {b["logprobs"] for b in toy_server.bodies} == {3}
