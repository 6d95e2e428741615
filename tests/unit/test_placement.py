import pytest

from backend.populations.placement import (
    NotEnoughCapacity,
    NotEnoughProcesses,
    Slot,
    eligible,
    is_free_process,
    place,
    place_dedicated,
)


def _slots(*free):
    return [Slot(worker_id=i + 1, address=f"h:{5000 + i}", free=f) for i, f in enumerate(free)]


def test_shares_follow_free_capacity_exactly():
    shares = place(1000, _slots(3000, 1000, 0, 6000))
    assert [(s.worker_id, n) for s, n in shares] == [(1, 300), (2, 100), (4, 600)]


def test_remainders_go_to_the_largest_fractions_and_sum_is_exact():
    shares = place(10, _slots(5, 5, 5))
    assert sum(n for _, n in shares) == 10
    assert [n for _, n in shares] == [4, 3, 3]  # equal fractions: the earlier worker first


def test_never_more_than_a_worker_can_hold():
    shares = place(12, _slots(10, 2))
    assert [(s.worker_id, n) for s, n in shares] == [(1, 10), (2, 2)]


def test_too_big_says_how_much_is_free():
    with pytest.raises(NotEnoughCapacity, match="5 agents fit on 2 online worker"):
        place(6, _slots(3, 2, 0))


def _fleet(*nodes):
    """Slots of workers numbered in order; each node given as (name, labels, free per process)."""
    slots, wid = [], 0
    for name, labels, frees in nodes:
        for free in frees:
            wid += 1
            slots.append(Slot(wid, f"{name}:{5000 + wid}", free, free, name, labels))
    return slots


def test_nodes_take_turns_so_a_small_population_spans_them():
    slots = eligible(_fleet(("a", {}, [100, 100, 100]), ("b", {}, [100, 100, 100])), {})
    assert [s.node for s in slots] == ["a", "b", "a", "b", "a", "b"]
    shares = place(2, slots)
    assert sorted(s.node for s, _ in shares) == ["a", "b"]


def test_a_node_selector_keeps_the_population_on_labelled_nodes():
    fleet = _fleet(("a", {"zone": "a", "gpu": "a100"}, [50, 50]), ("b", {"zone": "b"}, [500]))
    chosen = eligible(fleet, {"zone": "a"})
    assert [s.node for s in chosen] == ["a", "a"]
    assert {s.node for s, _ in place(100, chosen)} == {"a"}
    assert eligible(fleet, {"zone": "a", "gpu": "h100"}) == []
    with pytest.raises(
        NotEnoughCapacity, match="100 agents fit on 2 online worker.* labelled zone=a"
    ):
        place(101, chosen, selector={"zone": "a"})


def test_even_spread_gives_each_process_an_equal_share_as_far_as_room_allows():
    roomy = _slots(1000, 1000, 1000, 1000)
    assert [n for _, n in place(300, roomy, "even")] == [75, 75, 75, 75]
    assert [n for _, n in place(2, roomy, "even")] == [1, 1]  # the odd agents: earlier first
    slots = _slots(1000, 1000, 1000, 10)
    # The small room is filled; the others share the rest equally.
    assert [n for _, n in place(300, slots, "even")] == [97, 97, 96, 10]
    assert [n for _, n in place(3010, slots, "even")] == [1000, 1000, 1000, 10]
    # By capacity, the small worker takes almost nothing and the others a third each.
    assert [n for _, n in place(300, slots)] == [100, 100, 99, 1]


def test_a_process_per_agent_takes_only_processes_that_host_nothing():
    fleet = _fleet(("a", {}, [100, 100, 100]), ("b", {}, [100, 100]))
    slots = eligible(fleet, {})
    # The store places agents on workers 2 and 4 (or a deploy in flight chose them).
    shares = place_dedicated(3, slots, taken={2, 4})
    # In the order nodes take turns (a1 b1 a2 b2 a3) without the taken ones.
    assert [(s.worker_id, n) for s, n in shares] == [(1, 1), (5, 1), (3, 1)]
    # Nodes take turns: two agents land on two nodes.
    assert sorted(s.node for s, _ in place_dedicated(2, slots, taken=set())) == ["a", "b"]


def test_too_few_free_processes_are_refused_with_the_field_and_the_numbers():
    fleet = _fleet(("a", {"zone": "a"}, [100, 100, 100]), ("b", {"zone": "b"}, [100]))
    chosen = eligible(fleet, {"zone": "a"})
    with pytest.raises(NotEnoughProcesses) as refused:
        place_dedicated(3, chosen, taken={1, 3, 4}, selector={"zone": "a"})
    assert refused.value.http_status == 409
    assert str(refused.value).startswith(
        "placement.dedicated_process: 3 agents need 3 free worker processes"
    )
    assert "1 of the 3 online worker process(es) labelled zone=a are free" in str(refused.value)
    assert "--procs" in str(refused.value)


def test_a_process_without_room_is_not_free():
    assert not is_free_process(Slot(1, "a:1", 0, 0), set())  # a worker of capacity 0
    assert is_free_process(Slot(1, "a:1", 5, 5), set())
    assert not is_free_process(Slot(1, "a:1", 5, 5), {1})
