"""Exchangeable agents (issue 13, item 3): read a prompt's answer distribution once.

Agents whose whole prompt is the same in a round are exchangeable: at temperature T > 0 each
one's answer is an independent draw from one distribution, the constrained generation's. Rather
than ask the model once per agent, `read_distribution` reads that distribution from the model's
next-token log-probabilities (a "logprob tree"), and every agent draws from it with its own
uniform number (`AnswerDistribution.draw`): independent across agents, reproducible from the
agents' seeds, and the same in distribution as per-agent calls, up to the mass the read leaves
out (`pruned_mass`, and the bound `unlisted_bound`).

The tree. A node is an answer prefix (text). One `/v1/completions` request (max_tokens 1,
logprobs K=20, vLLM's maximum) with the prompt `system + "\n\n" + user + prefix` (where the
answer would go, as Generation joins them) gives the raw log-probabilities of the top K next
tokens. Kept are the tokens that extend the prefix to a valid prefix of an allowed answer
(AnswerConstraint.is_prefix) and, when the prefix is already a whole answer, the end of text;
p(token) is proportional to exp(logprob / T) over them (T = 0: the most likely one). That is what
the per-agent call samples: llama.cpp with LLAMA_CPP_PLAIN_SAMPLING and the GBNF grammar (the
grammar sets what it forbids to -inf, then temperature and softmax), vLLM with
`structured_outputs` (a mask, then temperature). Nodes are expanded best-first, the most
probable first, as many at once as the route takes (times its prompt-array batch size); a node
whose probability falls below `prune_below`, or is left when `max_nodes` have been expanded, is
pruned: its mass is `pruned_mass`, and `draw` renormalises over the rest.

The end of text. llama-cpp-python names every top token by its text without special tokens, so
Gemma's <eos> appears as "" (as do its ~6,600 other control and unused tokens, which have no
mass after an answer; when two share "" in one top list, the dict keeps the less likely one's).
vLLM names it by the tokenizer's decoding, "<eos>" for Gemma ("</s>", "<|endoftext|>",
"<|im_end|>", "<|eot_id|>", "<end_of_turn>"... for others): END_TEXTS lists both; their
probabilities add up.

The logprobs are the raw model's (temperature 1, no grammar): llama-cpp-python takes them from
the logits it evaluated, before its sampler chain (penalties, grammar, temperature); vLLM's
default `logprobs_mode` is "raw_logprobs". Two server facts shape the requests:
- llama-cpp-python returns logprobs only with `logits_all` on (`populace llm serve-local` turns
  it off for speed), and returns none when the token it samples is an end of text, which the
  most likely token after a whole answer often is. So llama.cpp requests carry a grammar of one
  printable character (ANY_CHARACTER_GBNF): what it samples is never the end (the logprobs do
  not depend on it), and the reply always has them.
- vLLM returns the logprobs of the end token like any other: no constraint there.

Only completions endpoints can take a prefix after the prompt, and only "basic" (constrained)
answers are an answer right away, and only numbers are spelled out by top-K lists: see
`can_read`.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

import numpy as np

from worker_server.llm.accounting import readable
from worker_server.llm.answering import AnswerSettings
from worker_server.llm.client import LlmClient, LlmFailure, LlmTimeout, Route
from worker_server.llm.constraints import AnswerConstraint
from worker_server.llm.protocol import Completion, Generation
from worker_server.llm.usage import UsageTally

# vLLM's default --max-logprobs (and OpenAI's limit is lower still).
TOP_LOGPROBS = 20
PRUNE_BELOW = 1e-4
# Prefixes asked about at most, per read.
MAX_NODES = 400
# About the requests one read keeps in flight (a number's tree is a few levels of a dozen or two
# prefixes): reads_at_once(route) reads run together, enough to keep the route's endpoints
# busy, never one per distinct prompt (10^5 of them flooded the event loop: issue 26, item 6).
READ_FANOUT = 16
# How servers name the end of text in a top-logprobs list (see the module docstring).
END_TEXTS = frozenset(
    {"", "<eos>", "</s>", "<|endoftext|>", "<end_of_turn>", "<|im_end|>", "<|eot_id|>",
     "<|end|>", "<|eom_id|>", "<|end_of_text|>"}
)  # fmt: skip
# One character, anything but NUL: llama.cpp then never samples an end of text (see above).
ANY_CHARACTER_GBNF = "root ::= [^\\x00]\n"


def reads_at_once(route: Route) -> int:
    """How many reads to run at once on a route (the callers queue the rest)."""
    return max(1, route.capacity // READ_FANOUT)


def can_read(settings: AnswerSettings) -> bool:
    """Whether the distribution of these answers can be read as a tree: completions (a prefix
    can follow the prompt), basic (constrained) answers, and a constraint whose answers the
    top-K lists spell out (`spelled_by_top_tokens`): numbers, whose tokenizers split digits.
    A word may take token paths outside the top K (Gemma puts two thirds of a heads/tails
    call through such paths), so choices are asked agent by agent."""
    return readable(settings.api, settings.answer_mode, settings.constraint.spelled_by_top_tokens)


@dataclass(frozen=True)
class _OneToken:
    """Generation.constraint for the tree's requests: per server, the fields that make the
    reply carry the logprobs of its one token (a RequestConstraint)."""

    def body_fields(self, server: str) -> dict:
        return {"grammar": ANY_CHARACTER_GBNF} if server == "llama_cpp" else {}


@dataclass(frozen=True)
class AnswerDistribution:
    """The answer distribution of one prompt: `values` ascending, each with the probability the
    tree gives it (together 1 - pruned_mass). When the tree could not be read (`error`: a
    request failed after its retries; `late`: the budget ran out) it is empty, and every agent
    drawing from it gets NaN, as agents whose call failed."""

    values: np.ndarray
    probabilities: np.ndarray
    pruned_mass: float
    # At most this much probability goes through valid tokens the top-K lists did not show
    # (below the K-th most likely token; see _Tree._unlisted_share): NaN when T > 1 and a
    # one-character continuation was missing somewhere.
    unlisted_bound: float
    requests: int  # HTTP requests answered (retries not included: see the usage tally)
    nodes: int  # prefixes asked about
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_s: float = 0.0
    error: bool = False
    late: bool = False
    texts: tuple[str, ...] = ()  # the most likely text of each value
    message: str = field(default="", compare=False)

    @property
    def ok(self) -> bool:
        return not (self.error or self.late) and len(self.values) > 0

    def draw(self, uniforms: np.ndarray) -> np.ndarray:
        """The answers of agents with these uniforms in [0, 1): inverse CDF over the values in
        ascending order, renormalised over the kept mass (NaN for all when not ok)."""
        u = np.asarray(uniforms, dtype=float)
        if not self.ok:
            return np.full(u.shape, math.nan)
        cdf = np.cumsum(self.probabilities)
        index = np.searchsorted(cdf, u * cdf[-1], side="right")
        return self.values[np.minimum(index, len(self.values) - 1)]

    def text_of(self, value: float) -> str:
        """The answer text for a value drawn (the most likely text giving it)."""
        index = int(np.searchsorted(self.values, value))
        if index < len(self.values) and self.values[index] == value:
            return self.texts[index]
        raise KeyError(f"{value!r} is not a value of this distribution")

    def mean(self) -> float:
        if not self.ok:
            return math.nan
        return float(np.dot(self.values, self.probabilities) / self.probabilities.sum())


def _failed(error: bool, late: bool, reader: _Tree, elapsed_s: float, message: str):
    return AnswerDistribution(
        values=np.empty(0),
        probabilities=np.empty(0),
        pruned_mass=1.0,
        unlisted_bound=math.nan,
        requests=reader.requests,
        nodes=reader.nodes,
        prompt_tokens=reader.prompt_tokens,
        completion_tokens=reader.completion_tokens,
        elapsed_s=elapsed_s,
        error=error,
        late=late,
        message=message,
    )


def _final(constraint: AnswerConstraint, prefix: str) -> bool:
    """A whole answer nothing can extend: the generation ends there, so it costs no request."""
    return constraint.accepts(prefix) and not any(
        constraint.is_prefix(prefix + c) for c in constraint.next_characters
    )


def read_requests_at_most(
    constraint: AnswerConstraint, batch_size: int, max_nodes: int = MAX_NODES
) -> tuple[int, int]:
    """(requests, prefixes) one read costs at most: every prefix of an allowed answer that is
    not a whole answer nothing extends, one character at a time (a token of several characters
    only skips prefixes), as the read asks them: a level of the tree at once, in requests of
    batch_size prefixes, at most max_nodes prefixes. A model puts its mass on fewer, and the
    read prunes the rest (prune_below), so a real read costs less: whole numbers over 0..100
    are 22 prefixes at most, Gemma 3 270M asks about 12 (BENCHMARKS.md, issue 13)."""
    batch = max(1, batch_size)
    level, requests, nodes = [""], 0, 0
    while level and nodes < max_nodes:
        asked = [p for p in level if not _final(constraint, p)][: max_nodes - nodes]
        nodes += len(asked)
        requests += -(-len(asked) // batch)
        level = [
            p + c for p in asked for c in constraint.next_characters if constraint.is_prefix(p + c)
        ]
    return requests, nodes


class _Tree:
    """The read's state: prefixes waiting with their mass, expanded prefixes with their kept
    continuations (a text may be reached by several token paths, e.g. " 4" and " " + "4": the
    mass that reaches an expanded prefix later flows through what it kept), whole answers."""

    def __init__(self, constraint: AnswerConstraint, temperature: float) -> None:
        self.constraint = constraint
        self.temperature = temperature
        self.pending: dict[str, float] = {"": 1.0}
        self.expanded: dict[str, list[tuple[str | None, float]]] = {}
        self.answers: dict[str, float] = {}
        self.dead_mass = 0.0  # at prefixes none of whose listed continuations is valid
        self.unlisted = 0.0
        self.requests = self.nodes = self.prompt_tokens = self.completion_tokens = 0

    def add(self, prefix: str, mass: float) -> None:
        kept = self.expanded.get(prefix)
        if kept is None and self._final(prefix):
            # A whole answer nothing can extend: the constrained generation ends there (its
            # only allowed token is the end), whatever the end's logprob: no request.
            kept = self.expanded[prefix] = [(None, 1.0)]
        if kept is None:
            self.pending[prefix] = self.pending.get(prefix, 0.0) + mass
            return
        if not kept:  # none of the listed continuations is valid: the mass is lost
            self.dead_mass += mass
        for child, p in kept:
            if child is None:
                self.answers[prefix] = self.answers.get(prefix, 0.0) + mass * p
            else:
                self.add(child, mass * p)

    def _final(self, prefix: str) -> bool:
        return _final(self.constraint, prefix)

    def expand(self, prefix: str, top: dict[str, float]) -> None:
        """Kept continuations of prefix from its top logprobs, and the mass it had flows on."""
        mass = self.pending.pop(prefix)
        self.nodes += 1
        whole = self.constraint.accepts(prefix)
        logprobs: dict[str | None, list[float]] = {}
        for token, logprob in top.items():
            if token in END_TEXTS:
                if whole:
                    logprobs.setdefault(None, []).append(logprob)
            elif self.constraint.is_prefix(prefix + token):
                logprobs.setdefault(prefix + token, []).append(logprob)
        kept = self._probabilities(logprobs)
        self.unlisted += mass * self._unlisted_share(prefix, top, logprobs)
        self.expanded[prefix] = kept
        self.add(prefix, mass)

    def _probabilities(
        self, logprobs: dict[str | None, list[float]]
    ) -> list[tuple[str | None, float]]:
        if not logprobs:
            return []
        if self.temperature <= 0:  # greedy: the most likely kept token
            best = max(logprobs, key=lambda k: max(logprobs[k]))
            return [(best, 1.0)]
        top = max(max(v) for v in logprobs.values())
        weights = {
            k: sum(math.exp((lp - top) / self.temperature) for lp in v) for k, v in logprobs.items()
        }
        total = sum(weights.values())
        return [(k, w / total) for k, w in weights.items()]

    def _unlisted_share(
        self, prefix: str, top: dict[str, float], kept: dict[str | None, list[float]]
    ) -> float:
        """A bound on the share of the node's tempered mass that valid tokens the list did not
        show take. 0 when every valid one-character continuation (and the end, after a whole
        answer) is listed: only a longer token could then be missing, and tokenizers that split
        digits (Gemma, Llama 3) have none. Otherwise each unlisted token has p <= the smallest
        listed p and all of them at most the mass not listed, so for T <= 1 their tempered
        weight is at most rest * p_min^(1/T - 1); above 1 there is no such bound (NaN)."""
        listed = set(kept)
        missing = any(
            prefix + c not in listed and self.constraint.is_prefix(prefix + c)
            for c in self.constraint.next_characters
        ) or (None not in listed and self.constraint.accepts(prefix))
        if not missing:
            return 0.0
        t = self.temperature
        if not kept:
            return 1.0
        if t > 1:
            return math.nan
        if t <= 0:  # greedy: an unlisted token is less likely than the kept one
            return 0.0
        probabilities = [math.exp(lp) for lp in top.values()]
        rest = max(0.0, 1.0 - sum(probabilities))
        bound = rest * min(probabilities) ** (1 / t - 1)
        weight = sum(math.exp(lp / t) for v in kept.values() for lp in v)
        return bound / (weight + bound)

    def result(self, elapsed_s: float) -> AnswerDistribution:
        by_value: dict[float, tuple[float, str, float]] = {}
        for text, p in self.answers.items():
            value = self.constraint.parse(text, "basic")
            total, best, best_p = by_value.get(value, (0.0, text, -1.0))
            if p > best_p:
                best, best_p = text, p
            by_value[value] = (total + p, best, best_p)
        values = sorted(by_value)
        return AnswerDistribution(
            values=np.array(values, dtype=float),
            probabilities=np.array([by_value[v][0] for v in values], dtype=float),
            pruned_mass=float(sum(self.pending.values()) + self.dead_mass),
            unlisted_bound=float(min(self.unlisted, 1.0)),  # a union bound over nodes
            requests=self.requests,
            nodes=self.nodes,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            elapsed_s=elapsed_s,
            texts=tuple(by_value[v][1] for v in values),
        )


@dataclass(frozen=True)
class _NextTokens:
    """One request of a read: the top next tokens after each of a few prefixes (one prompt per
    prefix), or the error that ends the read."""

    client: LlmClient
    route: Route
    max_retries: int
    system: str
    user: str
    usage: UsageTally | None
    top_logprobs: int

    async def __call__(self, prefixes: list[str], deadline: float) -> Completion | Exception:
        user = self.user
        generation = Generation(
            api="completions",
            model=self.route.model,
            system=self.system,
            user=user + prefixes[0],
            prompts=tuple(user + p for p in prefixes) if len(prefixes) > 1 else (),
            max_tokens=1,
            temperature=0.0,
            logprobs=self.top_logprobs,
            constraint=_OneToken(),
        )
        try:
            return await self.client.complete(
                self.route,
                generation,
                timeout_s=max(deadline - asyncio.get_running_loop().time(), 1e-3),
                max_retries=self.max_retries,
                usage=self.usage,
            )
        except (LlmTimeout, LlmFailure) as exc:
            return exc


async def read_distribution(
    client: LlmClient,
    route: Route,
    settings: AnswerSettings,
    system: str,
    user: str,
    usage: UsageTally | None = None,
    *,
    prune_below: float = PRUNE_BELOW,
    max_nodes: int = MAX_NODES,
    top_logprobs: int = TOP_LOGPROBS,
) -> AnswerDistribution:
    """The answer distribution of (system, user) under settings (basic answers over
    completions: see can_read), read within settings.timeout_s, retries included. Never raises
    for the model's or the network's faults: they make it `error` or `late`, like an Answer.
    Requests are counted per endpoint in `usage`."""
    if not can_read(settings):
        raise ValueError("only basic answers over completions can be read as a distribution")
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + settings.timeout_s
    tree = _Tree(settings.constraint, settings.temperature)
    batch = max(1, route.batch_size)
    width = max(1, route.capacity) * batch
    ask = _NextTokens(client, route, settings.max_retries, system, user, usage, top_logprobs)

    try:
        async with asyncio.timeout_at(deadline):
            while tree.nodes < max_nodes:
                ready = sorted(
                    (p for p, m in tree.pending.items() if m >= prune_below),
                    key=lambda p: -tree.pending[p],
                )[: min(width, max_nodes - tree.nodes)]
                if not ready:
                    break
                groups = [ready[i : i + batch] for i in range(0, len(ready), batch)]
                replies = await asyncio.gather(*(ask(g, deadline) for g in groups))
                for prefixes, reply in zip(groups, replies, strict=True):
                    if isinstance(reply, LlmTimeout):
                        return _failed(
                            reply.failed_attempts > 0, True, tree, loop.time() - started, str(reply)
                        )
                    if isinstance(reply, Exception):
                        return _failed(True, False, tree, loop.time() - started, str(reply))
                    tree.requests += 1
                    tree.prompt_tokens += reply.prompt_tokens
                    tree.completion_tokens += reply.completion_tokens
                    for prefix, choice in zip(prefixes, reply.choices, strict=True):
                        if not choice.top_logprobs:
                            message = "the server sent no logprobs (llama.cpp needs logits_all)"
                            return _failed(True, False, tree, loop.time() - started, message)
                        tree.expand(prefix, choice.top_logprobs[0])
    except TimeoutError:
        message = f"the distribution was not read within {settings.timeout_s:g} s"
        return _failed(False, True, tree, loop.time() - started, message)
    return tree.result(loop.time() - started)
