"""Workers keep each hosted agent's graph row: decoded and checked from AgentBatch.graph, kept
aligned with the rows through uploads out of order, deletes and replays, and read back by
Population.neighbour_block."""

from __future__ import annotations

import numpy as np
import pytest

from worker_server.agents import AgentStore, InvalidBatch, decode_batch
from worker_server.graphs.generators import erdos_renyi, graph_rng
from worker_server.rpc import worker_pb2 as pb

POP = 7
BASE = POP << 32


def rows_message(offsets, numbers) -> pb.GraphRows:
    return pb.GraphRows(
        offsets=np.asarray(offsets, dtype="<i8").tobytes(),
        neighbours=np.asarray(numbers, dtype="<i4").tobytes(),
    )


def batch(numbers_of: list[int], graph, **extra) -> pb.AgentBatch:
    """A batch of agents POP:n for n in numbers_of, with the given graph's rows."""
    ids = [BASE | n for n in numbers_of]
    message = pb.AgentBatch(population_id=str(POP), agent_ids=ids, **extra)
    if graph is not None:
        block = [graph.neighbours(n) for n in numbers_of]
        offsets = np.concatenate([[0], np.cumsum([len(b) for b in block])])
        numbers = np.concatenate(block) if block else np.empty(0)
        message.graph.CopyFrom(rows_message(offsets, numbers))
    return message


def upload(store: AgentStore, *batches: pb.AgentBatch) -> int:
    with store.upload() as up:
        for i, b in enumerate(batches):
            up.add(decode_batch(b, i))
        return up.commit()


@pytest.fixture
def graph():
    return erdos_renyi(300, 6.0, graph_rng(11))


def check_rows(population, graph, rows=None):
    rows = np.arange(len(population)) if rows is None else np.asarray(rows)
    offsets, numbers = population.neighbour_block(rows)
    assert offsets.dtype == np.int64 and numbers.dtype == np.int64
    assert len(offsets) == len(rows) + 1 and offsets[0] == 0
    for i, row in enumerate(rows):
        number = int(population.ids[row]) & 0xFFFFFFFF
        assert numbers[offsets[i] : offsets[i + 1]].tolist() == graph.neighbours(number).tolist()


def test_rows_arrive_in_batches_out_of_order_and_stay_aligned(graph):
    store = AgentStore(1000)
    numbers = np.random.default_rng(0).permutation(300)
    parts = np.array_split(numbers, 4)
    assert upload(store, *(batch(p.tolist(), graph) for p in parts[:2])) > 0
    upload(store, *(batch(p.tolist(), graph) for p in parts[2:]))
    population = store.population(str(POP))
    assert population.has_graph and len(population) == 300
    assert np.all(np.diff(population.ids) > 0)  # sorted by id, rows moved with them
    check_rows(population, graph)
    check_rows(population, graph, [5, 3, 299, 0, 17])  # any rows, any order
    check_rows(population, graph, np.arange(40, 90))  # a contiguous run
    offsets, numbers = population.neighbour_block(np.empty(0, dtype=np.int64))
    assert offsets.tolist() == [0] and numbers.size == 0


def test_deleting_agents_drops_their_rows_and_memory_is_counted(graph):
    store = AgentStore(1000)
    upload(store, batch(list(range(300)), graph))
    before = store.nbytes()
    population = store.population(str(POP))
    assert population.graph.nbytes == 8 * 301 + 4 * 2 * graph.edges
    store.delete_ids(np.array([BASE | n for n in range(0, 300, 3)]))
    after = store.population(str(POP))
    assert len(after) == 200 and after.graph.offsets.size == 201
    check_rows(after, graph)
    assert store.nbytes() < before
    replay = after.replaying(1)
    assert replay.has_graph
    check_rows(replay, graph, [1, 2])
    store.delete_population(str(POP))
    assert store.nbytes() == 0


def test_a_population_without_a_graph_has_empty_blocks():
    store = AgentStore(10)
    upload(store, pb.AgentBatch(population_id="q", agent_ids=[1, 2, 3]))
    population = store.population("q")
    assert not population.has_graph
    offsets, numbers = population.neighbour_block(np.array([0, 2]))
    assert offsets.tolist() == [0, 0, 0] and numbers.size == 0


def test_a_batch_must_carry_rows_when_its_population_has_a_graph(graph):
    store = AgentStore(1000)
    with pytest.raises(InvalidBatch, match="batch 1: graph:"):
        upload(store, batch([0, 1], graph), batch([2, 3], None))
    assert store.population(str(POP)) is None and store.reserved == 0
    upload(store, batch([0, 1], graph))
    with pytest.raises(InvalidBatch, match="batch 0: graph:"):
        upload(store, batch([2, 3], None))
    upload(store, pb.AgentBatch(population_id="plain", agent_ids=[1]))
    with pytest.raises(InvalidBatch, match="batch 0: graph:"):
        upload(
            store,
            pb.AgentBatch(population_id="plain", agent_ids=[2], graph=rows_message([0, 0], [])),
        )


@pytest.mark.parametrize(
    ("offsets", "numbers", "message"),
    [
        ([0, 1], [5], "graph.offsets: has 16 bytes: needs 24"),
        ([1, 1, 1], [], "graph.offsets: must start at 0"),
        ([0, 2, 1], [5, 6], r"graph.offsets: must never decrease: offsets\[2\] = 1 after 2"),
        ([0, 1, 3], [5, 6], "graph.offsets: ends at 3, but graph.neighbours holds 2 numbers"),
        ([0, 2, 3], [6, 5, 9], "graph.neighbours: agent .* neighbours are not strictly ascending"),
        ([0, 2, 3], [5, 5, 9], "graph.neighbours: .*not strictly ascending"),
        ([0, 1, 2], [0, 9], "graph.neighbours: agent .* lists itself"),
    ],
)
def test_bad_rows_are_refused_naming_the_field(offsets, numbers, message):
    b = pb.AgentBatch(population_id=str(POP), agent_ids=[BASE, BASE | 1])
    b.graph.CopyFrom(rows_message(offsets, numbers))
    with pytest.raises(InvalidBatch, match=f"batch 3: {message}"):
        decode_batch(b, 3)


def test_neighbour_bytes_must_be_whole_numbers():
    b = pb.AgentBatch(population_id=str(POP), agent_ids=[BASE])
    b.graph.offsets = np.array([0, 1], dtype="<i8").tobytes()
    b.graph.neighbours = b"\x01\x00\x00"
    with pytest.raises(InvalidBatch, match="graph.neighbours: has 3 bytes, not a multiple of 4"):
        decode_batch(b, 0)


def test_numbers_are_read_as_unsigned_32_bit():
    b = pb.AgentBatch(population_id=str(POP), agent_ids=[BASE])
    b.graph.offsets = np.array([0, 1], dtype="<i8").tobytes()
    b.graph.neighbours = np.array([0xFFFFFFFE], dtype="<u4").tobytes()
    staged = decode_batch(b, 0)
    assert staged.graph.numbers.tolist() == [0xFFFFFFFE]
