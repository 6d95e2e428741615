"""The column store: all-or-nothing uploads, capacity, paging, deletes, memory, personas."""

from __future__ import annotations

import numpy as np
import pytest

from worker_server.agents import AgentStore, CapacityExceeded, InvalidBatch, decode_batch
from worker_server.rpc import worker_pb2 as pb

EDUCATION = ["primary school", "high school", "doctorate"]


def batch(population_id, ids, *, personas=None, attributes=None):
    ids = np.asarray(ids, dtype=np.int64)
    if attributes is None:
        attributes = {"education": (EDUCATION, (ids % 3).tolist())}
    return pb.AgentBatch(
        population_id=population_id,
        agent_ids=ids.tolist(),
        attributes=[
            pb.AttributeColumn(name=name, categories=cats, codes=codes)
            for name, (cats, codes) in attributes.items()
        ],
        personas=personas or [],
    )


def upload(store, *batches):
    with store.upload() as up:
        for i, b in enumerate(batches):
            up.add(decode_batch(b, i))
        return up.commit()


def all_ids(store, population_id="", page=7):
    ids, after = [], None
    while True:
        agents, after = store.list_agents(population_id, after, page)
        ids += [a.id for a in agents]
        if after is None:
            return ids


def test_upload_commits_every_batch_and_reports_the_total():
    totals = []
    store = AgentStore(1000, on_total_change=totals.append)
    assert upload(store, batch("a", range(0, 10)), batch("a", range(10, 25))) == 25
    assert upload(store, batch("b", [100, 101])) == 2
    assert store.total == 27 and totals == [25, 27]
    assert store.population_counts() == {"a": 25, "b": 2}
    agent = store.list_agents("a", 3, 1)[0][0]
    assert (agent.id, agent.population_id, agent.attributes) == (
        4,
        "a",
        {"education": "high school"},
    )
    assert agent.persona == "" and agent.memory == []


def test_pages_are_complete_ordered_and_without_duplicates_across_populations():
    store = AgentStore(10_000)
    rng = np.random.default_rng(3)
    ids = rng.permutation(np.arange(1, 3001) * 3)
    # Populations interleave by id, and the upload arrives unsorted.
    upload(store, batch("a", ids[:1000]), batch("b", ids[1000:2000]), batch("a", ids[2000:]))
    listed = all_ids(store, page=97)
    assert listed == sorted(ids.tolist())
    only_b = all_ids(store, "b", page=100)
    assert only_b == sorted(ids[1000:2000].tolist())
    agents, after = store.list_agents("", None, 3000)
    assert len(agents) == 3000 and after is None, "no next page when the page holds the rest"
    agents, after = store.list_agents("", None, 2999)
    assert after == agents[-1].id == sorted(ids.tolist())[-2]
    assert store.list_agents("nope", None, 10) == ([], None)


def test_attributes_from_batches_with_different_dictionaries_are_merged():
    store = AgentStore(100)
    first = batch("a", [1, 2], attributes={"edu": (["x", "y"], [0, 1])})
    # Same attribute, other category order and a new category; and a second attribute.
    second = batch(
        "a", [3, 4, 5], attributes={"edu": (["z", "y"], [0, 1, 1]), "age": (["old"], [0, 0, 0])}
    )
    upload(store, first, second)
    upload(store, batch("a", [0], attributes={"age": (["young", "old"], [0])}))
    got = {a.id: a.attributes for a in store.list_agents("a", None, 10)[0]}
    assert got == {
        0: {"age": "young"},
        1: {"edu": "x"},
        2: {"edu": "y"},
        3: {"edu": "z", "age": "old"},
        4: {"edu": "y", "age": "old"},
        5: {"edu": "y", "age": "old"},
    }
    assert store.population("a").attributes["edu"].categories == ("x", "y", "z")


def test_codes_widen_past_uint16():
    store = AgentStore(100)
    many = [f"c{i}" for i in range(70_000)]
    upload(store, batch("a", [1], attributes={"k": (["only"], [0])}))
    upload(store, batch("a", [2, 3], attributes={"k": (many, [69_999, 5])}))
    population = store.population("a")
    assert population.attributes["k"].codes.dtype == np.uint32
    got = {a.id: a.attributes["k"] for a in store.list_agents("a", None, 10)[0]}
    assert got == {1: "only", 2: "c69999", 3: "c5"}


def test_personas_round_trip_including_unicode_nul_and_batches_without_them():
    store = AgentStore(100)
    texts = ["Ein Bäcker 🍞", "", "has\x00a nul", "plain"]
    upload(store, batch("a", [1, 2, 3, 4], personas=texts), batch("a", [5]))
    got = {a.id: a.persona for a in store.list_agents("a", None, 10)[0]}
    assert got == {1: texts[0], 2: "", 3: texts[2], 4: "plain", 5: ""}


def test_delete_by_ids_keeps_the_rest_intact_and_compacts_personas():
    store = AgentStore(10_000)
    ids = np.arange(1000)
    upload(store, batch("a", ids, personas=[f"persona {i}" for i in ids]), batch("b", [5000]))
    assert store.delete_ids(np.array([*range(0, 1000, 4), 5000, 99_999])) == 251
    assert store.delete_ids(np.array([0, 4])) == 0, "idempotent"
    assert store.population("b") is None, "a population without agents is gone"
    rest = store.list_agents("a", None, 1000)[0]
    assert [a.id for a in rest] == [i for i in range(1000) if i % 4]
    assert all(a.persona == f"persona {a.id}" for a in rest)
    assert store.delete_ids(np.arange(0, 1000, 2)) == 250
    population = store.population("a")
    assert len(population.personas.blob) < 500 * 12, "deleted text was dropped"
    assert [a.persona for a in store.list_agents("a", None, 3)[0]] == [
        "persona 1",
        "persona 3",
        "persona 5",
    ]
    assert store.total == 500


def test_delete_population_and_all_are_idempotent():
    store = AgentStore(100)
    upload(store, batch("a", range(10)), batch("b", range(10, 15)))
    assert store.delete_population("a") == 10
    assert store.delete_population("a") == 0
    assert store.delete_all() == 5
    assert store.delete_all() == 0
    assert store.total == 0 and store.population_counts() == {}


def test_a_bad_batch_anywhere_creates_nothing():
    store = AgentStore(100)
    upload(store, batch("a", [1, 2]))
    with pytest.raises(InvalidBatch, match=r"batch 1: agent_ids: agent 7 appears more than once"):
        upload(store, batch("b", [5, 6, 7]), batch("b", [7, 8]))
    with pytest.raises(InvalidBatch, match=r"batch 0: agent_ids: agent 2 is already hosted"):
        upload(store, batch("b", [2, 3]))
    assert store.population_counts() == {"a": 2}
    assert store.reserved == 0, "failed uploads give their reservation back"


def test_capacity_is_all_or_nothing_and_says_how_many_fit():
    store = AgentStore(10)
    upload(store, batch("a", range(4)))
    with pytest.raises(CapacityExceeded) as info:
        upload(store, batch("b", range(10, 14)), batch("b", range(14, 18)))
    assert str(info.value) == "capacity 10, hosting 4: 6 more fit, asked for 8"
    assert store.total == 4 and store.reserved == 0
    assert upload(store, batch("b", range(10, 16))) == 6


def test_concurrent_uploads_cannot_overshoot_capacity_together():
    store = AgentStore(10)
    first, second = store.upload(), store.upload()
    first.add(decode_batch(batch("a", range(6)), 0))
    with pytest.raises(CapacityExceeded, match=r"\(6 reserved by other uploads in progress\): 4"):
        second.add(decode_batch(batch("b", range(10, 16)), 0))
    second.add(decode_batch(batch("b", range(10, 14)), 0))
    assert first.commit() == 6 and second.commit() == 4
    assert store.total == 10 and store.reserved == 0


def test_memory_is_a_bounded_ring_that_survives_uploads_and_deletes():
    store = AgentStore(100, memory_size=3)
    upload(store, batch("a", [10, 20, 30]))
    population = store.population("a")
    for number, value in enumerate((1.0, 2.0, 3.0, 4.0), start=1):
        store.record_round(population, "s", number, np.array([0, 2]), np.array([value, -value]))
    # Agents are added and removed: the round's snapshot is stale, decisions go by id.
    upload(store, batch("a", [5, 25]))
    store.delete_ids(np.array([10]))
    store.record_round(population, "s", 5, np.array([0, 1, 2]), np.array([9.0, 8.0, 7.0]))
    got = {a.id: a.memory for a in store.list_agents("a", None, 10)[0]}
    assert got == {5: [], 20: [8.0], 25: [], 30: [-3.0, -4.0, 7.0]}
    # Every ring moved on together: the newcomers did not play round 5 (-inf), and knew nothing
    # of round 4 (empty).
    rings = recent(store)
    assert rings[20] == [-np.inf, -np.inf, 8.0] and rings[30] == [-3.0, -4.0, 7.0]
    assert np.isnan(rings[5][:2]).all() and rings[5][2] == -np.inf
    assert store.memory_log("a").rounds == [2, 3, 4, 5], "one more round than remembered"


def memory_batch(population_id, ids, simulation_id, rounds, values):
    message = batch(population_id, ids)
    message.memory.simulation_id = simulation_id
    message.memory.rounds.extend(rounds)
    message.memory.values.extend(np.asarray(values, dtype=np.float64).ravel().tolist())
    return message


def recent(store, population_id="a"):
    population = store.population(population_id)
    return {
        int(i): row.tolist()
        for i, row in zip(
            population.ids, population.recent_memory(np.arange(len(population))), strict=True
        )
    }


def test_agents_moved_here_bring_memory_aligned_with_the_population_log():
    nan = float("nan")
    store = AgentStore(100, memory_size=3)
    upload(store, batch("a", [10, 20]))
    population = store.population("a")
    for number in (1, 2, 3):
        store.record_round(population, "s", number, np.array([0, 1]), np.array([number, 10.0]))
    # Two agents arrive with what they remember of rounds 1, 2 and 4 (agent 31: no valid
    # answer in round 2): aligned with the log's rounds 1-3, round 3 (not sent) is -inf and
    # round 4 (not logged here) is dropped.
    upload(store, memory_batch("a", [30, 31], "s", [1, 2, 4], [[5, 6, 7], [8, nan, 9]]))
    assert store.memory_log("a").rounds == [1, 2, 3]
    got = recent(store)
    assert got[30] == [5.0, 6.0, -np.inf] and got[31] == [8.0, -np.inf, -np.inf]
    assert got[10] == [1.0, 2.0, 3.0]
    assert {a.id: a.memory for a in store.list_agents("a", None, 10)[0]}[30] == [5.0, 6.0]
    # The next round moves every ring on together.
    store.record_round(store.population("a"), "s", 4, np.arange(4), np.array([4.0, 4, 4, 4]))
    got = recent(store)
    assert got[30] == [6.0, -np.inf, 4.0] and got[10] == [2.0, 3.0, 4.0]


def test_a_population_new_here_takes_its_log_from_the_memory_it_brings():
    store = AgentStore(100, memory_size=2)
    rounds = [1, 2, 3, 4, 5]
    values = np.arange(10, dtype=float).reshape(2, 5)
    upload(
        store,
        memory_batch("a", [7, 8], "s", rounds, values),
        memory_batch("a", [9], "s", [5, 6], [[50, 60]]),
        batch("a", [11]),
    )
    # The ring holds memory_size + 1 entries: the last three rounds of every batch's rounds.
    assert store.memory_log("a").simulation_id == "s"
    assert store.memory_log("a").rounds == [4, 5, 6]
    assert store.memory_seen_by("a", "s", 7) == ((5, 6), 0)
    assert store.memory_seen_by("a", "s", 6) == ((4, 5), 1), "a replay of round 6"
    assert store.memory_seen_by("a", "other", 7) == ((), 3)
    got = recent(store)
    assert got[7] == [4.0, -np.inf] and got[8] == [9.0, -np.inf] and got[9] == [50.0, 60.0]
    assert np.isnan(got[11]).all(), "a batch without memory"
    # A replay of round 6 sees the agents' memory as it was before it.
    replaying = store.population("a").replaying(1)
    assert replaying.recent_memory(np.arange(4))[2].tolist() == [-np.inf, 50.0]
    assert replaying.memory_of(2) == [50.0]


def test_memory_of_another_simulation_replaces_the_log_and_hosted_memory():
    store = AgentStore(100, memory_size=3)
    upload(store, batch("a", [1, 2]))
    store.record_round(store.population("a"), "old", 1, np.arange(2), np.array([1.0, 2.0]))
    upload(store, memory_batch("a", [3], "new", [4, 5], [[40, 50]]))
    assert store.memory_log("a").simulation_id == "new"
    got = recent(store)
    assert np.isnan(got[1]).all() and np.isnan(got[2]).all()
    assert np.isnan(got[3][0]) and got[3][1:] == [40.0, 50.0]


def test_batches_of_one_population_must_remember_the_same_simulation():
    store = AgentStore(100)
    upload(store, batch("a", [1]))
    with pytest.raises(InvalidBatch, match=r"batch 1: memory.simulation_id: 'y' differs from 'x'"):
        upload(
            store,
            memory_batch("a", [2], "x", [1], [[1.0]]),
            memory_batch("a", [3], "y", [1], [[1.0]]),
        )
    assert store.population_counts() == {"a": 1} and store.memory_log("a") is None
    assert store.reserved == 0


def test_the_log_goes_with_the_population():
    store = AgentStore(100)
    upload(store, memory_batch("a", [1, 2], "s", [1], [[1.0], [2.0]]))
    store.delete_ids(np.array([1]))
    assert store.memory_log("a").rounds == [1]
    store.delete_ids(np.array([2]))
    assert store.memory_log("a") is None
    upload(store, memory_batch("a", [1], "s", [1], [[1.0]]))
    store.delete_population("a")
    assert store.memory_log("a") is None
    upload(store, memory_batch("a", [1], "s", [1], [[1.0]]))
    store.delete_all()
    assert store.memory_log("a") is None


def test_population_columns_stay_small():
    store = AgentStore(200_000)
    ids = np.arange(100_000)
    upload(store, *[batch("a", ids[i : i + 10_000]) for i in range(0, 100_000, 10_000)])
    # ids 8 + one uint16 code 2 + memory ring (8 + 1) * 4 + ring position 1 bytes per agent.
    assert store.nbytes() == 100_000 * (8 + 2 + 36 + 1)
