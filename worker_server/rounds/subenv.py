"""The per-process sub-environment: runs one round for the agents of a population hosted here.

A round splits the population's acting agents (in id order) into cohorts of at most the
process's concurrency cap and runs each cohort through the policy as soon as the cap (shared
with every other round in the process) lets it. As cohorts finish, their valid decisions go into
the partial aggregate, and out in DecisionChunks of exactly `batch_size` decisions (the last one
smaller). After the last chunk comes one PartialAggregate; the agents' memory is written just
before it.

- only: with `spec.only` set, just those agents of the population act (the manager re-runs a
  round for the agents it lost with a worker); hosted agents not listed sit the round out (no
  decision, not counted, not late) and listed ids not hosted here are ignored.
- deadline: cohorts not finished when `deadline_s` passes are cancelled and their agents count
  as late (n_late, late_ids); the round still ends with its aggregate.
- cancel: CancelRound (or the consumer going away) cancels every cohort in flight; the
  iterator raises RoundCancelled and no aggregate is produced.
- invalid: a value that is NaN, infinite, outside [rule.min, rule.max] or (a plugin's round)
  not of the action's type counts in n_invalid and invalid_ids, not in the statistics, and is
  remembered as "no valid answer" (-inf).
- parts: a policy may report a cohort in parts as its agents finish (the LLM policy does), and
  mark agents late itself (its per-agent deadline); each part is settled as it arrives.
- memory: agents remember their own decisions per simulation, in rings aligned with the
  population's memory log (worker_server.agents.memory: one entry per logged round for every
  agent). A round that completes writes it (AgentStore.record_round):
  - a round of another simulation (than the log's) starts the memory afresh;
  - round > the last logged: a new entry for every agent: its decision, or -inf (no valid
    answer, late, or it sat the round out);
  - round == the last logged (a replay, for some agents or all): the acting agents' latest
    entries are overwritten, nothing is appended;
  - round < the last logged (round 1 again included): the logged rounds >= round are
    forgotten for every agent, then as a new round.
  While a replayed round runs, its agents see their memory as it was before that round (the
  entries being replayed are hidden; the rings keep one entry more than an agent remembers, so
  a replay of the latest round still sees as many rounds as the first play did). A cancelled
  round leaves memory as it was, rolled-back rounds included.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from worker_server.agents import AgentStore, Population
from worker_server.llm.shared_reads import RoundReads
from worker_server.llm.templates import Feedback
from worker_server.llm.usage import EndpointUsage
from worker_server.rounds.aggregate import Aggregator, PartialAggregate
from worker_server.rounds.errors import (
    InvalidRound,
    PluginFailed,
    RoundAlreadyRunning,
    RoundCancelled,
    RoundFailed,
)
from worker_server.rounds.policies import Cohort, CohortResult, GameRule, Policy, RoundContext
from worker_server.rounds.slots import AgentSlots

DEFAULT_BATCH_SIZE = 10_000
MAX_BATCH_SIZE = 1_000_000
# A slow round (an LLM answering a few agents a second) sends what it has at least this often,
# so the manager's progress and live LLM meters move before a batch_size chunk fills.
PROGRESS_FLUSH_S = 0.5


@dataclass(frozen=True)
class RoundSpec:
    round_id: str
    population_id: str
    round: int
    rule: GameRule
    policy: Policy
    feedback: float | None = None
    segment_by: tuple[str, ...] = ()
    bins: int = 101
    seed: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE
    deadline_s: float = 0.0  # 0 = none
    simulation_id: str = ""
    history: tuple[Feedback, ...] = ()
    store_responses: bool = False
    # When set: the ids (int64, sorted, unique) of the only agents that act in the round.
    only: np.ndarray | None = None
    # Beyond [rule.min, rule.max]: which values the action's type allows (a plugin's round).
    valid: Callable[[np.ndarray], np.ndarray] | None = None
    # A network simulation's end of round: given the population, the acting rows and their
    # values (float64, NaN: no valid action), it sends the peers theirs; returns bytes sent.
    on_complete: Callable[[Population, np.ndarray, np.ndarray], Awaitable[int]] | None = None
    # Where exchangeable LLM agents' answer distributions are read (once for the cluster).
    reads: RoundReads | None = None


@dataclass
class DecisionChunk:
    ids: np.ndarray  # int64: agent ids[i] chose values[i]
    values: np.ndarray  # float64
    invalid_ids: np.ndarray
    late_ids: np.ndarray
    # With store_responses: raw answers aligned with ids, and with invalid_ids.
    responses: list[str] | None = None
    invalid_responses: list[str] | None = None
    # This process's LLM usage in the round so far, for live meters.
    endpoints: list[EndpointUsage] = field(default_factory=list)


_EMPTY_IDS = np.empty(0, dtype=np.int64)
_EMPTY_TEXTS = np.empty(0, dtype=object)
_CANCEL = object()
_COHORT_DONE = object()


class _Running:
    """A round in flight, as CancelRound sees it."""

    def __init__(self, round_id: str) -> None:
        self.round_id = round_id
        self.cancelled = False
        self.done: asyncio.Queue = asyncio.Queue()

    def cancel(self) -> None:
        self.cancelled = True
        self.done.put_nowait(_CANCEL)

    def stop_if_cancelled(self) -> None:
        if self.cancelled:
            raise RoundCancelled(f"round {self.round_id!r} was cancelled")


class _Cohorts:
    """The acting rows cut into cohorts of at most the process's concurrency cap, each run
    through the policy as soon as the cap (shared with every other round here) lets it. Each
    cohort reports to `done`, as (cohort, item): its parts, then _COHORT_DONE or its error.
    Scheduling starts when made; stop() cancels what is scheduled or running."""

    def __init__(
        self,
        slots: AgentSlots,
        policy: Policy,
        deciding: Population | None,
        context: RoundContext,
        acting: np.ndarray | None,
        n_acting: int,
        done: asyncio.Queue,
    ) -> None:
        self._slots = slots
        self._policy = policy
        self._deciding = deciding
        self._context = context
        self._acting = acting
        self._n_acting = n_acting
        self._done = done
        self.size = max(1, min(slots.capacity, n_acting))
        self.count = -(-n_acting // self.size)
        self._held: dict[int, int] = {}  # cohort -> slots it holds
        self._tasks: dict[int, asyncio.Task] = {}
        self._scheduler = asyncio.create_task(self._schedule()) if self.count else None

    def rows(self, i: int) -> np.ndarray:  # built on demand: a small cap means many cohorts
        end = min((i + 1) * self.size, self._n_acting)
        if self._acting is None:
            return np.arange(i * self.size, end, dtype=np.int64)
        return self._acting[i * self.size : end]

    async def stop(self) -> None:
        pending = [
            t for t in (self._scheduler, *self._tasks.values()) if t is not None and not t.done()
        ]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for i in list(self._held):  # tasks cancelled before they started never ran their finally
            self._release(i)

    async def _schedule(self) -> None:
        for i in range(self.count):
            agents = min(self.size, self._n_acting - i * self.size)
            await self._slots.acquire(agents)
            self._held[i] = agents
            self._tasks[i] = asyncio.create_task(self._run(i))

    async def _run(self, i: int) -> None:
        try:
            parts = self._policy.decide_parts(Cohort(self._deciding, self.rows(i)), self._context)
            async with contextlib.aclosing(parts):
                async for part in parts:
                    self._done.put_nowait((i, part))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported to the round, which fails as a whole
            self._done.put_nowait((i, exc))
        else:
            self._done.put_nowait((i, _COHORT_DONE))
        finally:
            self._release(i)
            self._tasks.pop(i, None)

    def _release(self, i: int) -> None:
        if i in self._held:
            self._slots.release(self._held.pop(i))


class SubEnvironment:
    def __init__(
        self, store: AgentStore, slots: AgentSlots, progress_flush_s: float = PROGRESS_FLUSH_S
    ) -> None:
        self.progress_flush_s = progress_flush_s
        self._store = store
        self._slots = slots
        self._running: dict[str, _Running] = {}
        # Told each finished round's aggregate, once per round (worker_server.metrics counts it).
        self.on_finished: Callable[[PartialAggregate], None] | None = None

    @property
    def rounds_running(self) -> int:
        return len(self._running)

    def cancel(self, round_id: str) -> bool:
        running = self._running.get(round_id)
        if running is None or running.cancelled:
            return False
        running.cancel()
        return True

    def run(self, spec: RoundSpec) -> AsyncIterator[DecisionChunk | PartialAggregate]:
        """Validate now (raises InvalidRound / RoundAlreadyRunning), then iterate to run."""
        if spec.round_id in self._running:
            raise RoundAlreadyRunning(f"round {spec.round_id!r} is already running here")
        population = self._store.population(spec.population_id)
        segment_by = []
        if population is not None:
            for name in spec.segment_by:
                attribute = population.attributes.get(name)
                if attribute is None:
                    known = ", ".join(sorted(population.attributes)) or "none"
                    raise InvalidRound(
                        f"segment_by: {name!r} is not an attribute of population "
                        f"{spec.population_id!r} (it has: {known})"
                    )
                segment_by.append(attribute)
            spec.policy.check(population)
        return self._run(spec, population, segment_by)

    async def _run(
        self, spec: RoundSpec, population: Population | None, segment_by: list
    ) -> AsyncIterator[DecisionChunk | PartialAggregate]:
        # Registered on first iteration, so a round that is never iterated leaves nothing behind.
        if spec.round_id in self._running:
            raise RoundAlreadyRunning(f"round {spec.round_id!r} is already running here")
        running = self._running[spec.round_id] = _Running(spec.round_id)
        started = time.perf_counter()
        aggregator = Aggregator(spec.rule.min, spec.rule.max, spec.bins, segment_by)
        context, deciding = self._context(spec, population)
        n = len(population) if population is not None else 0
        # The rows that act: all (None), or those of spec.only hosted here.
        acting = _acting_rows(population, spec.only) if population is not None else None
        n_acting = n if acting is None else len(acting)
        settled = np.zeros(n, dtype=bool)
        # This round's decision per agent, written to memory when the round completes.
        decided = np.full(n, -np.inf, dtype=np.float32)
        # A network simulation's values, exact (memory keeps float32).
        exact = np.full(n, np.nan) if spec.on_complete is not None else None
        cohorts = _Cohorts(
            self._slots, spec.policy, deciding, context, acting, n_acting, running.done
        )
        deadline = started + spec.deadline_s if spec.deadline_s > 0 else None
        finished = 0
        out = _Batcher(spec.batch_size, spec.store_responses, self.progress_flush_s)
        try:
            while finished < cohorts.count:
                item = await _next(running.done, deadline)
                running.stop_if_cancelled()  # the cancel mark too: cancel() sets the flag first
                if item is None:  # deadline passed
                    break
                i, result = item
                if _cohort_ended(spec, cohorts.rows(i), result, settled):
                    finished += 1
                    continue
                valid_rows, valid_values = self._settle(
                    spec, population, cohorts.rows(i), result, aggregator, out, settled
                )
                decided[valid_rows] = valid_values
                if exact is not None:
                    exact[valid_rows] = valid_values
                for chunk in out.full(time.monotonic()):
                    chunk.endpoints = aggregator.endpoints.snapshot()
                    yield chunk
                    running.stop_if_cancelled()
            rows = np.arange(n, dtype=np.int64) if acting is None else acting
            if finished < cohorts.count:
                await cohorts.stop()
                _count_late(population, rows[~settled[rows]], aggregator, out)
            for chunk in out.rest():
                chunk.endpoints = aggregator.endpoints.snapshot()
                yield chunk
                running.stop_if_cancelled()
            running.stop_if_cancelled()
            yield await self._complete(
                spec, population, rows, decided, exact, aggregator, running, started
            )
        finally:
            del self._running[spec.round_id]
            await cohorts.stop()

    async def _complete(
        self,
        spec: RoundSpec,
        population: Population | None,
        rows: np.ndarray,
        decided: np.ndarray,
        exact: np.ndarray | None,
        aggregator: Aggregator,
        running: _Running,
        started: float,
    ) -> PartialAggregate:
        """A round whose decisions are all out: peers told (a network simulation), memory
        written, and its aggregate."""
        if population is not None and spec.on_complete is not None:
            aggregator.network_bytes = await spec.on_complete(population, rows, exact[rows])
            running.stop_if_cancelled()
        if population is not None:
            self._store.record_round(
                population, spec.simulation_id, spec.round, rows, decided[rows]
            )
        result = aggregator.result(time.perf_counter() - started)
        if self.on_finished is not None:
            self.on_finished(result)
        return result

    def _context(
        self, spec: RoundSpec, population: Population | None
    ) -> tuple[RoundContext, Population | None]:
        """What the policy is told of the round, and the population as it decides: with the
        agents' memory as it was before this round, even in a replay."""
        remembered, hidden = (
            self._store.memory_seen_by(spec.population_id, spec.simulation_id, spec.round)
            if population is not None
            else ((), 0)
        )
        context = RoundContext(
            spec.round,
            spec.seed,
            spec.rule,
            spec.feedback,
            simulation_id=spec.simulation_id,
            history=spec.history,
            memory_rounds=remembered,
            store_responses=spec.store_responses,
            reads=spec.reads,
        )
        deciding = population.replaying(hidden) if population is not None else None
        return context, deciding

    def _settle(
        self,
        spec: RoundSpec,
        population: Population,
        cohort_rows: np.ndarray,
        part: CohortResult,
        aggregator: Aggregator,
        out: _Batcher,
        settled: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Count a part and queue its decisions; returns the rows and values of the valid ones."""
        rows = cohort_rows if part.positions is None else cohort_rows[part.positions]
        values = np.asarray(part.values, dtype=np.float64)
        if values.shape != rows.shape:
            raise RoundFailed(
                f"policy {spec.policy.kind!r} returned {values.shape} values for {len(rows)} agents"
            )
        if settled[rows].any():
            raise RoundFailed(f"policy {spec.policy.kind!r} answered for an agent twice")
        settled[rows] = True
        aggregator.prompt_tokens += part.prompt_tokens
        aggregator.cached_tokens += part.cached_tokens
        aggregator.completion_tokens += part.completion_tokens
        aggregator.llm_errors += part.llm_errors
        aggregator.add_endpoints(part.endpoints)
        texts = None
        if spec.store_responses:
            texts = (
                np.asarray(part.responses, dtype=object)
                if part.responses is not None
                else np.full(len(rows), "", dtype=object)
            )
            if texts.shape != rows.shape:
                raise RoundFailed(
                    f"policy {spec.policy.kind!r} returned {len(texts)} responses for "
                    f"{len(rows)} agents"
                )
        ids = population.ids[rows]
        if part.late is not None:
            late = np.asarray(part.late, dtype=bool)
            if late.any():
                aggregator.n_late += int(late.sum())
                out.late.append(ids[late])
                on_time = ~late
                rows, values, ids = rows[on_time], values[on_time], ids[on_time]
                texts = texts[on_time] if texts is not None else None
        valid = np.isfinite(values) & (values >= spec.rule.min) & (values <= spec.rule.max)
        if spec.valid is not None:
            valid &= spec.valid(values)
        if valid.all():
            good_rows, good, good_texts = rows, values, texts
        else:
            good_rows, good = rows[valid], values[valid]
            good_texts = texts[valid] if texts is not None else None
            aggregator.n_invalid += int(len(rows) - len(good_rows))
            out.add_invalid(ids[~valid], texts[~valid] if texts is not None else None)
            ids = ids[valid]
        aggregator.add(good_rows, good)
        out.add(ids, good, good_texts)
        return good_rows, good


def _cohort_ended(spec: RoundSpec, rows: np.ndarray, result, settled: np.ndarray) -> bool:
    """True when a cohort said it is done (every agent of it settled); False for a part of its
    decisions. A cohort that failed fails the round."""
    if isinstance(result, PluginFailed):
        raise result  # the plugin's own error, as it said it
    if isinstance(result, BaseException):
        raise RoundFailed(
            f"policy {spec.policy.kind!r} failed: {type(result).__name__}: {result}"
        ) from result
    if result is not _COHORT_DONE:
        return False
    if not settled[rows].all():
        missing = int(len(rows) - settled[rows].sum())
        raise RoundFailed(
            f"policy {spec.policy.kind!r} left {missing} of {len(rows)} agents without a result"
        )
    return True


def _count_late(
    population: Population, late: np.ndarray, aggregator: Aggregator, out: _Batcher
) -> None:
    """The rows the deadline caught without an answer count (and go out) as late."""
    aggregator.n_late += len(late)
    out.late.append(population.ids[late])


def _acting_rows(population: Population, only: np.ndarray | None) -> np.ndarray | None:
    """Rows (ascending) of the agents in `only` hosted here; None: every agent acts."""
    if only is None:
        return None
    rows, found = population.rows_of(only)
    return np.unique(rows[found])


async def _next(queue: asyncio.Queue, deadline: float | None):
    """The next finished cohort (or the cancel mark); None once the deadline has passed."""
    if deadline is None:
        return await queue.get()
    remaining = deadline - time.perf_counter()
    if remaining <= 0:
        return queue.get_nowait() if not queue.empty() else None
    try:
        return await asyncio.wait_for(queue.get(), remaining)
    except TimeoutError:
        return None


class _Batcher:
    """Cuts decisions into chunks of exactly batch_size (the last one smaller), and sends what
    is pending when PROGRESS_FLUSH_S passed since the last chunk (a slow round)."""

    def __init__(
        self, batch_size: int, responses: bool = False, flush_s: float = PROGRESS_FLUSH_S
    ) -> None:
        self.batch_size = batch_size
        self.responses = responses
        self.flush_s = flush_s
        self._flushed = time.monotonic()
        self._ids: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._texts: list[np.ndarray] = []
        self._pending = 0
        self.invalid: list[np.ndarray] = []
        self.invalid_texts: list[np.ndarray] = []
        self.late: list[np.ndarray] = []

    def add(self, ids: np.ndarray, values: np.ndarray, texts: np.ndarray | None = None) -> None:
        if len(ids):
            self._ids.append(ids)
            self._values.append(values)
            if self.responses:
                self._texts.append(texts)
            self._pending += len(ids)

    def add_invalid(self, ids: np.ndarray, texts: np.ndarray | None = None) -> None:
        self.invalid.append(ids)
        if self.responses:
            self.invalid_texts.append(texts)

    def full(self, now: float):
        if self._pending < self.batch_size:
            if now - self._flushed >= self.flush_s and (self._pending or self.invalid):
                self._flushed = now
                yield self._pending_chunk()
            return
        self._flushed = now
        ids, values = np.concatenate(self._ids), np.concatenate(self._values)
        texts = np.concatenate(self._texts) if self.responses else None
        cut = len(ids) - len(ids) % self.batch_size
        for start in range(0, cut, self.batch_size):
            end = start + self.batch_size
            invalid, invalid_texts = self._take_invalid()
            yield DecisionChunk(
                ids[start:end],
                values[start:end],
                invalid,
                _EMPTY_IDS,
                _texts(texts, start, end),
                invalid_texts,
            )
        self._ids, self._values = [ids[cut:]], [values[cut:]]
        self._texts = [texts[cut:]] if texts is not None else []
        self._pending = len(ids) - cut

    def _pending_chunk(self) -> DecisionChunk:
        """What is pending (fewer than batch_size decisions) as one chunk."""
        ids = np.concatenate(self._ids) if self._ids else _EMPTY_IDS
        values = np.concatenate(self._values) if self._values else np.empty(0)
        texts = np.concatenate(self._texts) if self._texts else _EMPTY_TEXTS
        self._ids, self._values, self._texts, self._pending = [], [], [], 0
        invalid, invalid_texts = self._take_invalid()
        return DecisionChunk(
            ids,
            values,
            invalid,
            _EMPTY_IDS,
            _texts(texts if self.responses else None, 0, len(ids)),
            invalid_texts,
        )

    def rest(self):
        """Everything left: remaining decisions, invalid and late ids, batch_size of each per chunk."""
        ids = np.concatenate(self._ids) if self._ids else _EMPTY_IDS
        values = np.concatenate(self._values) if self._values else np.empty(0)
        texts = np.concatenate(self._texts) if self._texts else _EMPTY_TEXTS
        invalid = np.concatenate(self.invalid) if self.invalid else _EMPTY_IDS
        invalid_texts = np.concatenate(self.invalid_texts) if self.invalid_texts else _EMPTY_TEXTS
        late = np.concatenate(self.late) if self.late else _EMPTY_IDS
        self._ids, self._values, self._texts, self._pending = [], [], [], 0
        self.invalid, self.invalid_texts, self.late = [], [], []
        step = self.batch_size
        for start in range(0, max(len(ids), len(invalid), len(late)), step):
            end = start + step
            yield DecisionChunk(
                ids[start:end],
                values[start:end],
                invalid[start:end],
                late[start:end],
                _texts(texts if self.responses else None, start, end),
                _texts(invalid_texts if self.responses else None, start, end),
            )

    def _take_invalid(self) -> tuple[np.ndarray, list[str] | None]:
        if not self.invalid:
            return _EMPTY_IDS, [] if self.responses else None
        invalid = np.concatenate(self.invalid)
        texts = np.concatenate(self.invalid_texts) if self.responses else None
        self.invalid, self.invalid_texts = [], []
        if len(invalid) <= self.batch_size:
            return invalid, _texts(texts, 0, len(invalid))
        self.invalid = [invalid[self.batch_size :]]
        if texts is not None:
            self.invalid_texts = [texts[self.batch_size :]]
        return invalid[: self.batch_size], _texts(texts, 0, self.batch_size)


def _texts(texts: np.ndarray | None, start: int, end: int) -> list[str] | None:
    return None if texts is None else texts[start:end].tolist()
