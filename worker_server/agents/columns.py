"""One population's agents hosted in this process, stored column-wise.

A million agents are a handful of numpy arrays, not a million Python objects: int64 ids (sorted,
so pages and lookups are binary searches), one dictionary-encoded code column per attribute (the
category names are kept once per population), the personas as one UTF-8 buffer with per-agent
start/length, and each agent's memory of its own past decisions as an (n, K + 1) float32 ring
(an agent remembers K rounds; the spare entry lets a replay of the latest round still see the K
before it), and, for a population with a graph, each agent's neighbour numbers as one CSR block
(worker_server.agents.graph_rows). `Agent` is a view materialised on demand (ListAgents, per-agent policies), never
kept resident.

A `Population` is replaced, not edited, when agents are added or deleted (a running round keeps
the snapshot it started with); only the memory ring is written in place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worker_server.agents.errors import InvalidBatch
from worker_server.agents.graph_rows import GraphRows, concat_rows, empty_rows
from worker_server.agents.memory import StagedMemory

DEFAULT_MEMORY_SIZE = 8


def ring_width(memory_size: int) -> int:
    """Entries in a memory ring: the rounds an agent remembers, plus one (see the docstring)."""
    return memory_size + 1


def code_dtype(n_categories: int) -> np.dtype:
    """The narrowest code type with room for every category plus the MISSING sentinel."""
    return np.dtype(np.uint16) if n_categories < np.iinfo(np.uint16).max else np.dtype(np.uint32)


def missing_code(dtype: np.dtype) -> int:
    """The code of an agent that has no value for an attribute (it came in a batch without it)."""
    return int(np.iinfo(dtype).max)


class Agent:
    """One agent, as a view over its population's columns (materialised on demand)."""

    __slots__ = ("id", "population_id", "attributes", "persona", "memory")

    def __init__(
        self,
        id: int,
        population_id: str,
        attributes: dict[str, str],
        persona: str,
        memory: list[float],
    ) -> None:
        self.id = id
        self.population_id = population_id
        self.attributes = attributes
        self.persona = persona
        # The agent's own past decisions, oldest first.
        self.memory = memory

    def __repr__(self) -> str:
        return (
            f"Agent(id={self.id}, population_id={self.population_id!r}, "
            f"attributes={self.attributes!r}, memory={self.memory!r})"
        )


@dataclass(frozen=True)
class Attribute:
    """A categorical attribute: agent row r has categories[codes[r]] (MISSING: no value)."""

    name: str
    categories: tuple[str, ...]
    codes: np.ndarray

    @property
    def missing(self) -> int:
        return missing_code(self.codes.dtype)


@dataclass(frozen=True)
class Personas:
    """Persona texts as one UTF-8 buffer: agent row r's persona is blob[start[r]:start[r]+length[r]]."""

    blob: bytes
    start: np.ndarray  # int64
    length: np.ndarray  # uint32

    def text(self, row: int) -> str:
        begin = int(self.start[row])
        return self.blob[begin : begin + int(self.length[row])].decode("utf-8")

    def take(self, rows: np.ndarray) -> Personas:
        start, length = self.start[rows], self.length[rows]
        live = int(length.sum(dtype=np.int64))
        if live * 2 >= len(self.blob):
            return Personas(self.blob, start, length)
        return _compact(self.blob, start, length)


def _compact(blob: bytes, start: np.ndarray, length: np.ndarray) -> Personas:
    """Drop the text of deleted agents once it is more than half the buffer (vectorised)."""
    raw = np.frombuffer(blob, dtype=np.uint8)
    edges = np.zeros(len(raw) + 1, dtype=np.int8)
    np.add.at(edges, start, 1)
    np.add.at(edges, start + length.astype(np.int64), -1)
    keep = np.cumsum(edges[:-1], dtype=np.int8) > 0
    order = np.argsort(start, kind="stable")
    new_start = np.empty_like(start)
    lengths = length[order].astype(np.int64)
    new_start[order] = np.cumsum(lengths) - lengths
    return Personas(raw[keep].tobytes(), new_start, length)


class Population:
    """The agents of one population hosted here; rows are in ascending id order."""

    __slots__ = (
        "population_id",
        "ids",
        "attributes",
        "personas",
        "memory",
        "memory_next",
        "hidden",
        "graph",
    )

    def __init__(
        self,
        population_id: str,
        ids: np.ndarray,
        attributes: dict[str, Attribute],
        personas: Personas | None,
        memory: np.ndarray,
        memory_next: np.ndarray,
        hidden: int = 0,
        graph: GraphRows | None = None,
    ) -> None:
        self.population_id = population_id
        self.ids = ids
        self.attributes = attributes
        self.personas = personas
        # memory[r] is a ring of agent r's decisions in the last rounds logged for the
        # population (NaN = empty entry, -inf = no valid answer that round); memory_next[r] is
        # the next slot. Every round logged moves every agent's ring on by one, so the latest
        # entries of all agents are from the same rounds (worker_server.agents.memory).
        self.memory = memory
        self.memory_next = memory_next
        # A view for a replayed round: its agents do not see their latest `hidden` entries
        # (from the rounds being replayed). 0 for the population itself.
        self.hidden = hidden
        # Each row's neighbour numbers when the population has a graph (None: no graph).
        self.graph = graph

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def memory_size(self) -> int:
        """How many rounds an agent remembers (the ring holds one entry more)."""
        return self.memory.shape[1] - 1

    @property
    def memory_width(self) -> int:
        return self.memory.shape[1]

    def nbytes(self) -> int:
        columns = [self.ids, self.memory, self.memory_next]
        columns += [a.codes for a in self.attributes.values()]
        if self.personas is not None:
            columns += [self.personas.start, self.personas.length]
        text = len(self.personas.blob) if self.personas is not None else 0
        graph = self.graph.nbytes if self.graph is not None else 0
        return sum(c.nbytes for c in columns) + text + graph

    @property
    def has_graph(self) -> bool:
        return self.graph is not None

    def neighbour_block(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The given rows' neighbours: (offsets int64 of len(rows) + 1, neighbour numbers int64),
        row i's being numbers[offsets[i]:offsets[i + 1]], ascending. Numbers are ids & 0xFFFFFFFF
        (the neighbour's index in the population, wherever it is hosted). Without a graph every
        row has none."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.graph is None:
            return np.zeros(len(rows) + 1, dtype=np.int64), np.empty(0, dtype=np.int64)
        return self.graph.block(rows)

    def rows_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the given ids, and a mask of which of them are hosted here."""
        if len(self.ids) == 0:
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        rows = np.searchsorted(self.ids, ids)
        clipped = np.minimum(rows, len(self.ids) - 1)
        found = self.ids[clipped] == ids
        return clipped, found

    def take(self, rows: np.ndarray) -> Population:
        """A new population of the given rows (ascending), e.g. the survivors of a delete."""
        return Population(
            self.population_id,
            self.ids[rows],
            {
                name: Attribute(name, a.categories, a.codes[rows])
                for name, a in self.attributes.items()
            },
            None if self.personas is None else self.personas.take(rows),
            self.memory[rows],
            self.memory_next[rows],
            self.hidden,
            None if self.graph is None else self.graph.take(rows),
        )

    def replaying(self, hidden: int) -> Population:
        """A view sharing every column whose agents do not see their latest `hidden` entries."""
        if hidden == self.hidden:
            return self
        return Population(
            self.population_id,
            self.ids,
            self.attributes,
            self.personas,
            self.memory,
            self.memory_next,
            hidden,
            self.graph,
        )

    # -- memory rings: every write moves or fills the same entries of every agent -----------

    def advance(self) -> None:
        """Open a new latest entry in every agent's ring: -inf (no valid answer) until written."""
        n = len(self.ids)
        if n == 0:
            return
        shared = self._shared_slot()
        if shared is not None:  # the usual case: one column, not a scatter over every ring
            self.memory[:, shared] = -np.inf
            self.memory_next[:] = (shared + 1) % self.memory_width
            return
        slot = self.memory_next.astype(np.int64)
        self.memory[np.arange(n), slot] = -np.inf
        self.memory_next[:] = (slot + 1) % self.memory_width

    def write_latest(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Overwrite the rows' latest entries with one decision each (in place)."""
        if len(rows) == 0:
            return
        shared = self._shared_slot()
        if shared is not None:
            self.memory[rows, (shared - 1) % self.memory_width] = values
            return
        slot = (self.memory_next[rows].astype(np.int64) - 1) % self.memory_width
        self.memory[rows, slot] = values

    def _shared_slot(self) -> int | None:
        """The next slot when every agent's ring is at the same one (agents that arrived or
        played apart may differ), else None."""
        if not len(self.memory_next):
            return None
        first = int(self.memory_next[0])
        return first if bool((self.memory_next == first).all()) else None

    def rewind(self, entries: int) -> None:
        """Forget every agent's latest `entries` entries (rounds rolled back)."""
        width = self.memory_width
        if entries >= width:
            self.forget()
            return
        if entries <= 0 or len(self.ids) == 0:
            return
        start = (self.memory_next.astype(np.int64) - entries) % width
        slots = (start[:, None] + np.arange(entries)) % width
        self.memory[np.arange(len(self.ids))[:, None], slots] = np.nan
        self.memory_next[:] = start

    def forget(self) -> None:
        """Empty every agent's memory (a new simulation starts)."""
        self.memory.fill(np.nan)
        self.memory_next.fill(0)

    def recent_memory(self, rows: np.ndarray) -> np.ndarray:
        """The rows' remembered entries in order, oldest first: shape (len(rows), memory_size),
        the last column the latest entry not hidden (NaN = empty, -inf = no valid answer that
        round)."""
        k, width, hidden = self.memory_size, self.memory_width, self.hidden
        first = self.memory_next[rows].astype(np.int64) - hidden - k
        order = (first[:, None] + np.arange(k)) % width
        recent = np.take_along_axis(self.memory[rows], order, axis=1)
        if hidden > 1:  # the ring holds fewer than k entries older than the hidden ones
            recent[:, : hidden - 1] = np.nan
        return recent

    def memory_of(self, row: int) -> list[float]:
        """The agent's valid past decisions it remembers, oldest first."""
        recent = self.recent_memory(np.array([row], dtype=np.int64))[0]
        return recent[np.isfinite(recent)].astype(np.float64).tolist()

    def agents(self, rows: Sequence[int] | np.ndarray) -> list[Agent]:
        """Materialise views of the given rows."""
        rows = np.asarray(rows, dtype=np.int64)
        ids = self.ids[rows].tolist()
        decoded: list[tuple[str, tuple[str, ...], list[int], int]] = [
            (name, a.categories, a.codes[rows].tolist(), a.missing)
            for name, a in self.attributes.items()
        ]
        # Every row's memory at once (one numpy call per row cost more than the rest together).
        recent = self.recent_memory(rows).astype(np.float64).tolist()
        agents = []
        for i, row in enumerate(rows.tolist()):
            attributes = {
                name: categories[codes[i]]
                for name, categories, codes, missing in decoded
                if codes[i] != missing
            }
            persona = self.personas.text(row) if self.personas is not None else ""
            memory = [v for v in recent[i] if math.isfinite(v)]
            agents.append(Agent(ids[i], self.population_id, attributes, persona, memory))
        return agents


@dataclass(frozen=True)
class StagedBatch:
    """One decoded, validated AgentBatch waiting for its upload to commit."""

    index: int  # position in the client stream, for error messages
    population_id: str
    ids: np.ndarray  # int64
    # name -> (categories, codes as uint32 indices into categories)
    attributes: dict[str, tuple[tuple[str, ...], np.ndarray]]
    personas: Personas | None
    # What the agents remember of a simulation (moved here mid-simulation), if sent.
    memory: StagedMemory | None = None
    # Their neighbour lists, when the population has a graph.
    graph: GraphRows | None = None

    def __len__(self) -> int:
        return len(self.ids)


def merge_population(
    population_id: str,
    existing: Population | None,
    batches: Sequence[StagedBatch],
    memory_size: int,
    log_rounds: Sequence[int] = (),
    forget_existing: bool = False,
) -> Population:
    """A population holding `existing`'s agents plus the batches' agents, sorted by id.

    Category dictionaries are unioned (existing categories keep their codes); an agent from a
    batch without some attribute gets the MISSING code for it. A batch's memory fills its
    agents' rings aligned with `log_rounds` (the population's memory log after the upload);
    agents without memory start with empty rings. `forget_existing`: the hosted agents' rings
    start empty too (the log is of another simulation now).
    """
    parts_ids = [b.ids for b in batches]
    new_ids = np.concatenate(parts_ids) if len(parts_ids) > 1 else parts_ids[0]
    n_old = len(existing) if existing is not None else 0
    n_new = len(new_ids)

    names: list[str] = list(existing.attributes) if existing is not None else []
    for batch in batches:
        names += [name for name in batch.attributes if name not in names]

    attributes: dict[str, Attribute] = {}
    for name in names:
        old = existing.attributes.get(name) if existing is not None else None
        attributes[name] = _merge_attribute(name, old, batches, n_old, n_new)

    personas = _merge_personas(existing, batches, n_old, n_new)
    width = ring_width(memory_size)
    memory = np.full((n_old + n_new, width), np.nan, dtype=np.float32)
    memory_next = np.zeros(n_old + n_new, dtype=np.uint8)
    if existing is not None:
        ids = np.concatenate((existing.ids, new_ids))
        if not forget_existing:
            memory[:n_old] = existing.memory
            memory_next[:n_old] = existing.memory_next
    else:
        ids = new_ids
    offset = n_old
    for batch in batches:
        if batch.memory is not None:
            ring, nexts = batch.memory.aligned_with(log_rounds, width)
            memory[offset : offset + len(batch)] = ring
            memory_next[offset : offset + len(batch)] = nexts
        offset += len(batch)
    graph = _merge_graph(existing, batches)
    merged = Population(population_id, ids, attributes, personas, memory, memory_next, graph=graph)

    # Managers send ascending ids, so the sort is usually skipped.
    in_order = n_new < 2 or bool(np.all(new_ids[1:] > new_ids[:-1]))
    after_old = n_old == 0 or n_new == 0 or new_ids[0] > existing.ids[-1]
    if in_order and after_old:
        return merged
    return merged.take(np.argsort(ids, kind="stable"))


def _merge_attribute(
    name: str, old: Attribute | None, batches: Sequence[StagedBatch], n_old: int, n_new: int
) -> Attribute:
    """One attribute over the hosted agents (`old`'s codes, or MISSING where they lack it) and
    the batches' (MISSING for a batch without it), its categories the union in first-seen order."""
    categories = list(old.categories) if old is not None else []
    index = {c: i for i, c in enumerate(categories)}
    mapped: list[np.ndarray | None] = []
    for batch in batches:
        column = batch.attributes.get(name)
        if column is None:
            mapped.append(None)
            continue
        batch_categories, codes = column
        lookup = np.empty(len(batch_categories), dtype=np.int64)
        for i, category in enumerate(batch_categories):
            lookup[i] = index.setdefault(category, len(index))
        mapped.append(lookup[codes] if len(lookup) else codes.astype(np.int64))
    categories = list(index)
    dtype = code_dtype(len(categories))
    missing = missing_code(dtype)
    codes = np.empty(n_old + n_new, dtype=dtype)
    if n_old:
        if old is None:
            codes[:n_old] = missing
        else:
            old_codes = old.codes.astype(dtype, copy=False)
            if old.codes.dtype != dtype:  # widened: re-point the old sentinel
                old_codes = np.where(old.codes == old.missing, missing, old_codes)
            codes[:n_old] = old_codes
    offset = n_old
    for batch, part in zip(batches, mapped, strict=True):
        codes[offset : offset + len(batch)] = missing if part is None else part
        offset += len(batch)
    return Attribute(name, tuple(categories), codes)


def _merge_graph(existing: Population | None, batches: Sequence[StagedBatch]) -> GraphRows | None:
    """The existing rows' neighbour lists, then each batch's, in row order. A population has a
    graph for all its agents here or for none: a batch that differs is refused."""
    with_graph = [b for b in batches if b.graph is not None]
    if not with_graph:
        if existing is not None and existing.graph is not None:
            raise InvalidBatch(
                batches[0].index,
                "graph",
                f"population {existing.population_id!r} has a graph here: each batch of it "
                "must carry its agents' rows",
            )
        return None
    without = next((b for b in batches if b.graph is None), None)
    if without is not None or (existing is not None and len(existing) and existing.graph is None):
        index = without.index if without is not None else with_graph[0].index
        raise InvalidBatch(
            index,
            "graph",
            "every batch of a population with a graph carries its agents' rows, and a "
            "population hosted here without one cannot gain one",
        )
    parts = [existing.graph] if existing is not None and existing.graph is not None else []
    if existing is not None and existing.graph is None:  # no agents hosted yet
        parts = [empty_rows(len(existing))]
    return concat_rows([*parts, *(b.graph for b in batches)])


def _merge_personas(
    existing: Population | None, batches: Sequence[StagedBatch], n_old: int, n_new: int
) -> Personas | None:
    old = existing.personas if existing is not None else None
    if old is None and all(b.personas is None for b in batches):
        return None
    blobs = [old.blob] if old is not None else []
    start = np.zeros(n_old + n_new, dtype=np.int64)
    length = np.zeros(n_old + n_new, dtype=np.uint32)
    if old is not None:
        start[:n_old] = old.start
        length[:n_old] = old.length
    base = len(old.blob) if old is not None else 0
    offset = n_old
    for batch in batches:
        if batch.personas is not None:
            blobs.append(batch.personas.blob)
            start[offset : offset + len(batch)] = batch.personas.start + base
            length[offset : offset + len(batch)] = batch.personas.length
            base += len(batch.personas.blob)
        offset += len(batch)
    return Personas(b"".join(blobs), start, length)


def encode_personas(texts: Sequence[str]) -> Personas:
    """Pack persona texts into one buffer without a Python loop per agent where possible.

    They are joined with NUL separators and the separators found with numpy; a persona that
    itself contains NUL (legal in a proto string) falls back to encoding one by one.
    """
    n = len(texts)
    blob = "\x00".join(texts).encode("utf-8")
    separators = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 0)
    if len(separators) == n - 1:
        start = np.empty(n, dtype=np.int64)
        start[0] = 0
        start[1:] = separators + 1
        end = np.empty(n, dtype=np.int64)
        end[:-1] = separators
        end[-1] = len(blob)
        return Personas(blob, start, (end - start).astype(np.uint32))
    encoded = [t.encode("utf-8") for t in texts]
    length = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
    start = np.cumsum(length) - length
    return Personas(b"".join(encoded), start, length.astype(np.uint32))
