import pytest

from backend.populations.placement import NotEnoughCapacity, Slot, place


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
