"""The LLM policy: every agent asks an OpenAI-compatible model for its number.

A cohort (up to the process's concurrency cap, so possibly the whole population here) is
answered by a few runner coroutines per model, as many as that model's endpoints may have in
flight from this process: coroutines stay bounded by the endpoints' caps, never one per agent
of a large cohort. Runners take agents in order, build their prompts (materialising agents a
chunk at a time, never the whole cohort), and report results in parts as they finish, so a
round over a large population streams decisions while it runs.

Prompts fill {persona}, {history}, {round}, {min}, {max}, {ratio}, {offset} and the agent's
attributes by name (an attribute the agent lacks renders empty). {history} is the agent's own
past choices in this simulation next to each earlier round's outcome.

Batches: where the endpoints take prompt arrays (route.batch_size > 1, completions on vLLM or
OpenAI), a runner sends up to that many agents' prompts in one request. The OpenAI API has one
`seed` per request and vLLM seeds every prompt of the array with it, so a batched request
carries the seed of its first agent: an agent's answer depends on its prompt and that seed,
which is reproducible on the same placement (the same cohort makes the same batches) but not
per agent, and the agents of one request share their random numbers. batch_size 1 keeps one
seed per agent. At temperature > 0 a batch never carries one prompt twice (both would get the
same draw): a repeated prompt waits for a later request.

At temperature 0 agents whose prompts are identical (template personas from a few attributes,
say) are exchangeable: greedy decoding gives each the same answer, so the first one asks and
the others take its answer (unless the policy says each agent asks). The shared answers are
remembered by a digest of the prompts, a bounded number of them per cohort.

At temperature > 0 such agents are exchangeable too: each one's answer is an independent draw
from the same distribution. With basic answers over completions (worker_server.llm.distribution
can read it), a cohort first digests every agent's prompt (`census`): a prompt that at most
ASK_BEFORE_READING of its agents share is asked by each of them; one that more share has its
answer distribution read once, for the whole cluster (worker_server.llm.shared_reads: the
prompt's owner among the round's processes reads it, the others ask the owner), and each of
its agents draws from it with its own uniform (randomness.LLM_DRAW of its id and the round).
Asking and drawing give each agent the same distribution, and which agents draw depends only on
how many share their prompt, so such a round gives the same answers on 1, 2 or 4 processes.
Chat endpoints and chain-of-thought answers ask once per agent.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

import worker_server.rounds.randomness as randomness
from worker_server.agents import Population
from worker_server.llm.accounting import ASK_BEFORE_READING, answering_mode
from worker_server.llm.answering import Answer, AnswerSettings, answer_batch
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.client import LlmClient, Route
from worker_server.llm.distribution import AnswerDistribution, can_read, reads_at_once
from worker_server.llm.shared_reads import RoundReads, SharedReads, prompt_digest
from worker_server.llm.spec import EndpointSpec, InvalidLlmRequest
from worker_server.llm.templates import (
    MAX_PROMPT_CHARS,
    ROUND_PLACEHOLDERS,
    HistoryText,
    Template,
    number_text,
    round_placeholder_limits,
    too_long,
)
from worker_server.llm.usage import UsageTally
from worker_server.rounds.errors import InvalidRound
from worker_server.rounds.plugin_round import (
    PluginRound,
    PromptInputs,
    answer_constraint,
    plugin_prompts,
    prompt_inputs,
)
from worker_server.rounds.policies import Cohort, CohortResult, Policy, RoundContext

# A part goes out once this many agents have finished, or this long after the last one.
PART_AGENTS = 1000
PART_INTERVAL_S = 0.1
# Agents materialised at a time for their prompts.
PROMPT_CHUNK = 256
# Answers to identical prompts remembered per cohort (oldest forgotten first): bounded memory
# when every prompt differs, and enough to cover the distinct prompts of attribute templates.
SHARED_ANSWERS_KEPT = 65_536
# Repeated prompts a runner holds back for later batches, per prompt of its batch size.
DEFERRED_PER_SLOT = 4
# Agents a runner takes between two turns of the event loop. Every runner of every cohort
# takes its turn in one pass of the loop (hundreds of them): a pass must stay well under the
# heartbeat interval however many agents are answered without asking.
JOBS_PER_TURN = 32
# Exchangeable mode: prompts digested between two turns of the event loop.
CENSUS_PER_TURN = 256


@dataclass(frozen=True, eq=False)
class LlmPolicy(Policy):
    """Validated by worker_server.rounds.wire.llm_policy; holds the process's LlmClient."""

    endpoints: tuple[EndpointSpec, ...]
    default_model: str
    model_attribute: str
    model_by_category: Mapping[str, str]
    system_template: str
    user_template: str
    api: str
    answer_mode: str
    max_tokens: int
    temperature: float
    request_timeout_s: float
    max_retries: int
    extraction_call: bool
    client: LlmClient = field(repr=False)
    each_agent_asks: bool = False
    integer_answers: bool = False
    # A plugin's round: its agents answer the prompts it renders, in its action's type (the
    # templates above are then unused).
    plugin: PluginRound | None = None
    kind: str = field(default="llm", init=False)
    _system: Template = field(init=False, repr=False)
    _user: Template = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_system", Template(self.system_template))
        object.__setattr__(self, "_user", Template(self.user_template))

    def check(self, population: Population) -> None:
        attributes = population.attributes
        if self.model_attribute and self.model_attribute not in attributes:
            known = ", ".join(sorted(attributes)) or "none"
            raise InvalidRound(
                f"llm.model_attribute {self.model_attribute!r} is not an attribute of "
                f"population {population.population_id!r} (it has: {known})"
            )
        if self.plugin is not None:
            if self.plugin.network is not None:
                self.plugin.network.check(population)  # InvalidRound now, before any request
            return  # no templates: the plugin renders each prompt
        known = ROUND_PLACEHOLDERS | set(attributes)
        try:
            self._system.check(known, "llm.system_template")
            self._user.check(known, "llm.user_template")
        except InvalidLlmRequest as exc:
            raise InvalidRound(str(exc)) from None
        limits = round_placeholder_limits()
        longest = self._system.longest(limits) + self._user.longest(limits)
        if longest > MAX_PROMPT_CHARS:
            raise InvalidRound(
                "llm.user_template: " + too_long("a prompt", longest, MAX_PROMPT_CHARS)
            )

    async def decide(self, cohort: Cohort, context: RoundContext) -> CohortResult:
        """The whole cohort at once (the sub-environment uses decide_parts)."""
        parts = [part async for part in self.decide_parts(cohort, context)]
        values = np.full(len(cohort), np.nan)
        late = np.zeros(len(cohort), dtype=bool)
        responses = [""] * len(cohort) if context.store_responses else None
        usage = UsageTally()
        for part in parts:
            usage.add(part.endpoints)
            values[part.positions] = part.values
            late[part.positions] = part.late
            if responses is not None:
                for position, text in zip(part.positions.tolist(), part.responses, strict=True):
                    responses[position] = text
        return CohortResult(
            values=values,
            late=late,
            responses=responses,
            prompt_tokens=sum(p.prompt_tokens for p in parts),
            completion_tokens=sum(p.completion_tokens for p in parts),
            cached_tokens=sum(p.cached_tokens for p in parts),
            llm_errors=sum(p.llm_errors for p in parts),
            endpoints=usage.take(),
        )

    async def decide_parts(
        self, cohort: Cohort, context: RoundContext
    ) -> AsyncIterator[CohortResult]:
        run = _CohortRun(self, cohort, context)
        if self.plugin is not None:
            run.prompt_inputs = await prompt_inputs(self.plugin, cohort, context)
        routes = self.client.routes(self.endpoints)
        # An endpoint whose breaker an earlier round opened gets its trials now, from this
        # round's first requests (once per round, whatever the number of cohorts).
        round_key = (context.simulation_id, context.round)
        self.client.begin_round(routes.values(), round_key, run.usage)
        tasks = []
        for model, positions in self._positions_by_model(cohort).items():
            route = routes[model]
            if run.exchangeable:
                run.reads.open(self.client, routes, run.settings)
                positions, groups = await run.census(route, positions)
                readers = reads_at_once(route) * max(1, len(run.reads.peers))
                for _ in range(min(len(groups), readers)):
                    tasks.append(asyncio.create_task(run.reader(route, groups)))
            jobs = run.jobs(positions)
            for _ in range(min(len(positions), route.capacity)):
                tasks.append(asyncio.create_task(run.runner(route, jobs)))
        pending = set(tasks)
        try:
            while pending:
                run.wake.clear()
                wake = asyncio.create_task(run.wake.wait())
                done, _ = await asyncio.wait(
                    pending | {wake}, timeout=PART_INTERVAL_S, return_when=asyncio.FIRST_COMPLETED
                )
                wake.cancel()
                for task in done - {wake}:
                    pending.discard(task)
                    task.result()  # a runner's bug fails the round
                if run.finished:
                    yield run.part()
            if run.finished:
                yield run.part()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _positions_by_model(self, cohort: Cohort) -> dict[str, np.ndarray]:
        if not self.model_attribute or not self.model_by_category:
            return {self.default_model: np.arange(len(cohort), dtype=np.int64)}
        attribute = cohort.population.attributes[self.model_attribute]
        models = sorted({self.default_model, *self.model_by_category.values()})
        index = {m: i for i, m in enumerate(models)}
        table = np.array(
            [index[self.model_by_category.get(c, self.default_model)] for c in attribute.categories]
            + [index[self.default_model]],  # the MISSING code lands on the extra entry
            dtype=np.int64,
        )
        codes = attribute.codes[cohort.rows].astype(np.int64)
        chosen = table[np.minimum(codes, len(table) - 1)]
        groups = {}
        for i, model in enumerate(models):
            positions = np.flatnonzero(chosen == i)
            if len(positions):
                groups[model] = positions
        return groups


class _CohortRun:
    """The state of one cohort's answers while its runners work."""

    def __init__(self, policy: LlmPolicy, cohort: Cohort, context: RoundContext) -> None:
        self.policy = policy
        self.cohort = cohort
        self.context = context
        n = len(cohort)
        rule = context.rule
        self.settings = AnswerSettings(
            api=policy.api,
            answer_mode=policy.answer_mode,
            max_tokens=policy.max_tokens,
            temperature=policy.temperature,
            timeout_s=policy.request_timeout_s,
            max_retries=policy.max_retries,
            extraction_call=policy.extraction_call,
            constraint=(
                answer_constraint(policy.plugin.action)
                if policy.plugin is not None
                else NumberConstraint.for_range(rule.min, rule.max, policy.integer_answers)
            ),
        )
        self.seeds = randomness.words(context.seed, context.round, randomness.LLM_SEED, cohort.ids)
        self.values = np.full(n, np.nan)
        self.late = np.zeros(n, dtype=bool)
        self.texts: list[str] | None = [""] * n if context.store_responses else None
        self.prompt_tokens = self.completion_tokens = self.cached_tokens = self.llm_errors = 0
        # Per endpoint, since the last part: every request is counted before its agent finishes,
        # so the last part carries the last counts.
        self.usage = UsageTally()
        self.finished: list[int] = []
        self.wake = asyncio.Event()
        # A plugin's round: what its prompts show besides attributes (set before any job).
        self.prompt_inputs: PromptInputs | None = None
        self.base = {
            "round": str(context.round),
            "min": number_text(rule.min),
            "max": number_text(rule.max),
            "ratio": f"{rule.ratio:g}",
            "offset": f"{rule.offset:g}",
            "history": "",
            "persona": "",
        }
        self.history_columns = _history_columns(context, cohort.population.memory_size)
        self.history_text = HistoryText(context.history)
        # The rule the estimate counts with too (worker_server.llm.accounting): greedy decoding
        # answers identical prompts identically, so they ask once; sampled answers to one
        # prompt are draws from one distribution, so it is read once.
        mode = answering_mode(policy.temperature, policy.each_agent_asks, can_read(self.settings))
        self.share = mode == "shared"
        self.exchangeable = mode == "exchangeable"
        self.waiting: dict[bytes, list[int]] = {}  # prompt digest -> agents awaiting its answer
        self.answered: OrderedDict[bytes, Answer] = OrderedDict()
        if self.exchangeable:
            self.uniforms = randomness.uniforms(
                context.seed, context.round, randomness.LLM_DRAW, cohort.ids
            )
            # Where distributions are read: once for the cluster when the round says how
            # (worker_server.llm.shared_reads), else once for this cohort.
            key = (context.simulation_id, context.round)
            self.reads = context.reads or RoundReads(SharedReads(), key)

    def jobs(self, positions: np.ndarray) -> Iterator[tuple[int, str, str]]:
        """(position, system prompt, user prompt) per agent, shared by a model's runners.

        Only what the templates name is decoded per agent (no Agent objects), and a template
        with nothing per agent in it is rendered once: this loop runs once per agent. A
        plugin's round renders the plugin's prompts instead."""
        if self.policy.plugin is not None:
            yield from plugin_prompts(
                self.policy.plugin,
                self.cohort,
                self.context.round,
                positions,
                PROMPT_CHUNK,
                self.prompt_inputs,
            )
            return
        population = self.cohort.population
        system, user = self.policy._system, self.policy._user
        named = set(system.names) | set(user.names)
        attributes = [a for name, a in population.attributes.items() if name in named]
        personas = population.personas if "persona" in named else None
        with_history = "history" in named and bool(self.context.history)
        per_agent = {a.name for a in attributes} | {"persona", "history"}
        fixed_system = None if per_agent & set(system.names) else system.render(self.base)
        fixed_user = None if per_agent & set(user.names) else user.render(self.base)
        for start in range(0, len(positions), PROMPT_CHUNK):
            chunk = positions[start : start + PROMPT_CHUNK]
            rows = self.cohort.rows[chunk]
            decoded = [
                (a.name, a.categories, a.missing, a.codes[rows].tolist()) for a in attributes
            ]
            choices = None
            if with_history:
                memory = population.recent_memory(rows)
                columns = self.history_columns
                picked = memory[:, np.maximum(columns, 0)].astype(np.float64)
                choices = np.where(columns >= 0, picked, np.nan)
            for k, (position, row) in enumerate(zip(chunk.tolist(), rows.tolist(), strict=True)):
                # The round's placeholders win over an attribute of the same name.
                values = {}
                for name, categories, missing, codes in decoded:
                    code = codes[k]
                    values[name] = "" if code == missing else categories[code]
                values.update(self.base)
                if personas is not None:
                    values["persona"] = personas.text(row)
                if choices is not None:
                    values["history"] = self.history_text.render(choices[k])
                yield (
                    position,
                    fixed_system if fixed_system is not None else system.render(values),
                    fixed_user if fixed_user is not None else user.render(values),
                )

    async def runner(self, route: Route, jobs: Iterator[tuple[int, str, str]]) -> None:
        size = route.batch_size
        deferred: deque[tuple[tuple[int, str, str], int]] = deque()
        while True:
            batch, exhausted = self._next_batch(route, jobs, size, deferred)
            if not batch:
                if exhausted:
                    return
                await asyncio.sleep(0)  # agents were answered without asking: others' turn
                continue
            prompts = [(system, user) for _, system, user, _ in batch]
            # A batched request carries its first agent's seed (module docstring).
            seed = int(self.seeds[batch[0][0]])
            client, settings = self.policy.client, self.settings
            results = await answer_batch(client, route, settings, prompts, seed, self.usage)
            for i, ((position, _, _, key), result) in enumerate(zip(batch, results, strict=True)):
                # A failed batch is one failed request: its error is counted once.
                self._record([position], result, first=i == 0)
                if key is not None:
                    self._record(self.waiting.pop(key), result, first=False)
                    self.answered[key] = result
                    if len(self.answered) > SHARED_ANSWERS_KEPT:
                        self.answered.popitem(last=False)

    async def census(self, route: Route, positions: np.ndarray) -> tuple[np.ndarray, deque]:
        """Exchangeable mode: which agents ask and which draw. Every agent's prompt is digested
        first; a prompt that more than ASK_BEFORE_READING agents of the cohort share is read
        once (for the whole cluster, RoundReads) and all of them draw from it; the others
        ask. Returns the agents that ask, and per prompt read (position of the agent whose
        prompt it is, positions drawing from it)."""
        order, digests = [], []
        for i, (position, system, user) in enumerate(self.jobs(positions)):
            order.append(position)
            digests.append(prompt_digest(route.model, system, user))
            if i % CENSUS_PER_TURN == CENSUS_PER_TURN - 1:
                await asyncio.sleep(0)  # the heartbeat and other cohorts run meanwhile
        order_array = np.asarray(order, dtype=np.int64)
        keys = np.frombuffer(b"".join(digests), dtype="V16")
        del digests
        _, inverse, counts = await asyncio.to_thread(
            np.unique, keys, return_inverse=True, return_counts=True
        )
        inverse = inverse.reshape(-1)
        read = counts > ASK_BEFORE_READING  # accounting.prompt_cost counts the same
        drawn = read[inverse]
        codes = inverse[drawn]
        by_code = order_array[drawn][np.argsort(codes, kind="stable")]
        bounds = np.flatnonzero(np.diff(np.sort(codes))) + 1
        groups = deque((int(g[0]), g) for g in np.split(by_code, bounds) if len(g))
        return order_array[~drawn], groups

    async def reader(self, route: Route, groups: deque) -> None:
        """Read (or fetch from the prompt's owner) the distributions of `groups`, one at a
        time, and let their agents draw. A few readers per model run at once: never one task
        per distinct prompt (10^5 of them flooded the event loop: issue 26, item 6)."""
        while groups:
            first, positions = groups.popleft()
            _, system, user = next(self.jobs(np.array([first], dtype=np.int64)))
            read = await self.reads.read(route.model, system, user)
            self.usage.add(read.usage)
            if read.distribution.error:
                # The model's distribution could not be read (a server that gives no
                # logprobs, say): its agents ask, as they would without reading.
                self._count_usage(read.distribution, read.counts_usage)
                await self._ask_each(route, positions, system, user)
                continue
            self._draw(positions.tolist(), read.distribution, first=read.counts_usage)

    async def _ask_each(self, route: Route, positions: np.ndarray, system: str, user: str):
        """Agents sharing one prompt ask one by one, each with its own seed (a batched request
        would give them all one draw), at most the route's capacity at once."""
        pending = iter(positions.tolist())
        client, settings = self.policy.client, self.settings

        async def asker() -> None:
            for position in pending:
                seed = int(self.seeds[position])
                prompts = [(system, user)]
                (result,) = await answer_batch(client, route, settings, prompts, seed, self.usage)
                self._record([position], result, first=True)

        askers = min(len(positions), max(1, route.capacity))
        await asyncio.gather(*(asker() for _ in range(askers)))

    def _next_batch(
        self,
        route: Route,
        jobs: Iterator[tuple[int, str, str]],
        size: int,
        deferred: deque[tuple[tuple[int, str, str], int]],
    ) -> tuple[list[tuple[int, str, str, bytes | None]], bool]:
        """Up to `size` agents that must ask (position, system, user, shared-answer key).
        Agents whose answer is shared are recorded or queued on the way. At temperature > 0 a
        batch never holds one prompt twice (with one seed per request the server would give
        both the same draw): a repeated prompt waits in `deferred` for a later batch of this
        runner (at most DEFERRED_PER_SLOT times the batch size of them).

        At most JOBS_PER_TURN agents the batch does not carry are taken per call, so a long run
        of agents answered without asking (shared answers) cannot hold the event loop: the
        heartbeat and the decision stream run between calls. Returns the batch and whether the
        jobs are exhausted."""
        in_batch: set[int] = set()
        batch = _from_deferred(deferred, size, in_batch)
        model = route.model
        distinct = size > 1 and not self.share and self.policy.temperature > 0
        exhausted = False
        taken = 0  # agents taken that the batch does not carry
        while (
            len(batch) < size and len(deferred) < DEFERRED_PER_SLOT * size and taken < JOBS_PER_TURN
        ):
            job = next(jobs, None)
            if job is None:
                exhausted = True
                break
            taken += 1
            position, system, user = job
            key = None
            if self.share:
                key = prompt_digest(model, system, user)
                if key in self.answered:
                    self._record([position], self.answered[key], first=False)
                    continue
                if key in self.waiting:  # another agent is asking this very prompt
                    self.waiting[key].append(position)
                    continue
                self.waiting[key] = []
            elif distinct:
                # Python's hash is enough here: a collision only sends an agent one batch later.
                digest = hash((system, user))
                if digest in in_batch:
                    deferred.append((job, digest))
                    continue
                in_batch.add(digest)
            batch.append((position, system, user, key))
            taken -= 1
        return batch, exhausted

    def _draw(self, positions: list[int], distribution: AnswerDistribution, *, first: bool) -> None:
        """Each agent draws its answer from the distribution with its own uniform."""
        index = np.asarray(positions, dtype=np.int64)
        values = distribution.draw(self.uniforms[index])
        self.values[index] = values
        self.late[index] = distribution.late
        if self.texts is not None:
            for position, value in zip(positions, values.tolist(), strict=True):
                self.texts[position] = "" if math.isnan(value) else distribution.text_of(value)
        self.finished.extend(positions)
        self._count_usage(distribution, first)
        if len(self.finished) >= PART_AGENTS:
            self.wake.set()

    def _count_usage(self, distribution: AnswerDistribution, counts: bool) -> None:
        """A read's tokens and error, counted by the one asker its usage went to."""
        if counts:
            self.prompt_tokens += distribution.prompt_tokens
            self.completion_tokens += distribution.completion_tokens
            self.llm_errors += int(distribution.error)

    def _record(self, positions: list[int], result: Answer, *, first: bool) -> None:
        """`result` answers these agents; its usage (one request's) is counted once."""
        for position in positions:
            self.values[position] = result.value
            self.late[position] = result.late
            if self.texts is not None:
                self.texts[position] = result.text
            self.finished.append(position)
        if first:
            self.prompt_tokens += result.prompt_tokens
            self.completion_tokens += result.completion_tokens
            self.cached_tokens += result.cached_tokens
            self.llm_errors += int(result.error)
        if len(self.finished) >= PART_AGENTS:
            self.wake.set()

    def part(self) -> CohortResult:
        positions = np.asarray(self.finished, dtype=np.int64)
        self.finished = []
        part = CohortResult(
            values=self.values[positions],
            positions=positions,
            late=self.late[positions],
            responses=[self.texts[p] for p in positions.tolist()]
            if self.texts is not None
            else None,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
            llm_errors=self.llm_errors,
            endpoints=self.usage.take(),
        )
        self.prompt_tokens = self.completion_tokens = self.cached_tokens = self.llm_errors = 0
        return part


def _from_deferred(
    deferred: deque[tuple[tuple[int, str, str], int]], size: int, in_batch: set[int]
) -> list[tuple[int, str, str, bytes | None]]:
    """Up to `size` held-back agents whose prompt is not in the batch yet (added to in_batch);
    the others stay held back, in order."""
    batch: list[tuple[int, str, str, bytes | None]] = []
    for _ in range(len(deferred)):
        if len(batch) == size:
            break
        job, digest = deferred.popleft()
        if digest in in_batch:
            deferred.append((job, digest))
            continue
        in_batch.add(digest)
        batch.append((*job, None))
    return batch


def _history_columns(context: RoundContext, memory_size: int) -> np.ndarray:
    """For each history entry, the column of recent_memory holding the agent's choice in that
    round (-1: not remembered)."""
    rounds = context.memory_rounds
    columns = np.full(len(context.history), -1, dtype=np.int64)
    for i, feedback in enumerate(context.history):
        for back, number in enumerate(reversed(rounds), start=1):
            if number == feedback.round:
                if back <= memory_size:
                    columns[i] = memory_size - back
                break
    return columns
