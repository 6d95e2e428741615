"""The manager's load history: bounded rings of buckets, rates from counters, cluster totals."""

from __future__ import annotations

import logging
from typing import get_args

import pytest

from backend.workers.history import MAX_POINTS, WorkerHistory
from backend.workers.schemas import LogLevel


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def beat(history: WorkerHistory, worker_id: int = 1, *, cpu=10.0, rss=100, agents=5, llm=None):
    history.beat(worker_id, cpu_percent=cpu, rss_bytes=rss, agents=agents, llm_requests=llm)


def test_beats_in_one_bucket_make_one_point_with_mean_cpu_and_latest_levels():
    clock = Clock()
    history = WorkerHistory(bucket_s=10, window_s=3600, clock=clock)
    beat(history, cpu=10.0, rss=100, agents=5)
    clock.now += 3
    beat(history, cpu=30.0, rss=200, agents=7)
    [point] = history.worker(1)
    assert point.cpu_percent == pytest.approx(20.0)
    assert (point.rss_bytes, point.agents) == (200, 7)
    assert point.t == (clock.now // 10) * 10
    assert point.llm_requests_per_s is None  # no counter reported


def test_the_ring_is_bounded_and_keeps_the_newest_window():
    clock = Clock()
    history = WorkerHistory(bucket_s=10, window_s=100, clock=clock)
    assert history.points == 10
    for i in range(35):
        beat(history, cpu=float(i))
        clock.now += 10
    clock.now -= 10
    points = history.worker(1)
    assert [p.cpu_percent for p in points] == [float(i) for i in range(25, 35)]
    assert len(history._workers[1].ring.data) == 10 * 7  # never grew past its capacity
    # An hour of silence later, the window is empty.
    clock.now += 3600
    assert history.worker(1) == []


def test_points_are_capped_however_small_the_bucket():
    history = WorkerHistory(bucket_s=0.01, window_s=3600)
    assert history.points == MAX_POINTS
    assert history.window_s == pytest.approx(MAX_POINTS * 0.01)


def test_rates_come_from_counter_differences_over_the_time_between_beats():
    clock = Clock(1_000_006.0)
    history = WorkerHistory(bucket_s=10, clock=clock)
    beat(history, llm=100)  # the first beat: nothing to measure from
    clock.now += 4
    beat(history, llm=120)  # next bucket: 20 requests in 4 s
    clock.now += 4
    beat(history, llm=180)  # same bucket: 60 in 4 s, so 80 in 8 s
    clock.now += 16
    beat(history, llm=260)  # 80 in 16 s: a slow cadence measures right too
    points = history.worker(1)
    assert [p.llm_requests_per_s for p in points] == [None, pytest.approx(10.0), 5.0]


def test_a_counter_that_goes_down_is_a_restarted_process_counting_from_zero():
    clock = Clock()
    history = WorkerHistory(bucket_s=10, clock=clock)
    beat(history, llm=5000)
    clock.now += 10
    beat(history, llm=5100)
    clock.now += 10
    beat(history, llm=30)  # restarted: 30 since it started, not -5070
    rates = [p.llm_requests_per_s for p in history.worker(1)]
    assert rates == [None, 10.0, 3.0]
    assert all(r is None or r >= 0 for r in rates)


def test_no_rate_is_measured_across_an_offline_gap():
    clock = Clock()
    history = WorkerHistory(bucket_s=10, clock=clock)
    beat(history, llm=0)
    history.leave(1)
    clock.now += 600
    beat(history, llm=600)
    assert [p.llm_requests_per_s for p in history.worker(1)] == [None, None]


def test_cluster_totals_sum_the_live_workers_points():
    clock = Clock()
    history = WorkerHistory(bucket_s=10, clock=clock)
    beat(history, 1, cpu=50.0, rss=1000, agents=10, llm=0)
    beat(history, 2, cpu=30.0, rss=500, agents=4, llm=0)
    clock.now += 10
    beat(history, 1, cpu=70.0, rss=1100, agents=10, llm=50)  # 5 requests/s
    [first, second] = history.cluster()
    assert (first.workers, first.cpu_percent, first.rss_bytes, first.agents) == (2, 80.0, 1500, 14)
    assert (second.workers, second.cpu_percent, second.rss_bytes) == (2, 100.0, 1600)
    assert second.llm_requests_per_s == pytest.approx(5.0)
    clock.now += 10
    history.leave(2)  # offline: out of the totals, its own history kept
    last = history.cluster()[-1]
    assert (last.workers, last.cpu_percent, last.agents) == (1, 70.0, 10)
    assert len(history.worker(2)) == 1
    history.drop(1)  # removed: forgotten
    assert history.worker(1) == [] and 1 not in history
    assert history.cluster()[-1].workers == 0


def _summed(history: WorkerHistory, worker_ids) -> dict[float, tuple]:
    """The workers' series summed bucket by bucket (a missing rate counts 0)."""
    sums: dict[float, list] = {}
    for wid in worker_ids:
        for p in history.worker(wid):
            row = sums.setdefault(p.t, [0, 0.0, 0, 0, 0.0])
            row[0] += 1
            row[1] += p.cpu_percent
            row[2] += p.rss_bytes
            row[3] += p.agents
            row[4] += p.llm_requests_per_s or 0.0
    return {t: tuple(row) for t, row in sums.items()}


def _cluster_rows(history: WorkerHistory) -> dict[float, tuple]:
    return {
        p.t: (p.workers, p.cpu_percent, p.rss_bytes, p.agents, p.llm_requests_per_s)
        for p in history.cluster()
    }


def test_a_burst_early_in_a_bucket_shows_in_the_cluster_as_in_each_worker():
    # The run: each worker busy (56 requests/s, 3.5 % CPU over the bucket) for the first
    # beats, idle at the last one; the cluster showed the last beat's 0 and 1 %.
    clock = Clock(1_000_009.5)  # a beat before the bucket 1_000_010 starts
    history = WorkerHistory(bucket_s=10, clock=clock)
    counts = {1: 0, 2: 0}
    for wid in (1, 2):
        beat(history, wid, cpu=1.0, llm=0)
    for second in range(1, 10):
        clock.now = 1_000_010.0 + second - 0.5
        busy = second <= 6
        for wid in (1, 2):
            counts[wid] += 84 if busy else 0
            beat(history, wid, cpu=5.0 if busy else 0.25, llm=counts[wid])
    clock.now = 1_000_020.0
    for wid in (1, 2):
        beat(history, wid, cpu=1.0, llm=counts[wid])  # opens the next bucket
    one = {p.t: p for p in history.worker(1)}[1_000_010.0]
    assert one.cpu_percent == pytest.approx((6 * 5.0 + 3 * 0.25) / 9)
    assert one.llm_requests_per_s == pytest.approx(6 * 84 / 9)  # 56 /s, beats 1 s apart
    busy = _cluster_rows(history)[1_000_010.0]
    assert busy[0] == 2
    assert busy[1] == pytest.approx(2 * one.cpu_percent)
    assert busy[4] == pytest.approx(2 * one.llm_requests_per_s)
    summed = _summed(history, (1, 2))
    assert summed.keys() == _cluster_rows(history).keys()
    for t, row in _cluster_rows(history).items():
        assert row == pytest.approx(summed[t]), t


def test_the_cluster_is_the_sum_of_the_workers_points_bucket_by_bucket():
    clock = Clock(1_000_000.0)
    history = WorkerHistory(bucket_s=10, clock=clock)
    counts = {1: 0, 2: 0, 3: 0}
    for step in range(60):  # 3 workers, beats 1.7 s apart each, out of step with the buckets
        clock.now = 1_000_000.0 + step * 1.7
        for wid in counts:
            clock.now += 0.1 * wid
            counts[wid] += (step * wid) % 7
            beat(
                history,
                wid,
                cpu=float(step % 5 + wid),
                rss=1000 * wid + step,
                agents=wid * 10 + step % 3,
                llm=counts[wid],
            )
    summed, cluster = _summed(history, counts), _cluster_rows(history)
    assert summed.keys() == cluster.keys() and len(cluster) >= 10
    for t, row in cluster.items():
        assert row == pytest.approx(summed[t]), t


def test_a_silent_live_worker_counts_with_its_last_point_until_it_beats_again():
    clock = Clock(1_000_000.0)
    history = WorkerHistory(bucket_s=10, clock=clock)
    beat(history, 1, cpu=10.0, rss=100, agents=5)
    beat(history, 2, cpu=20.0, rss=200, agents=7)
    clock.now += 10  # a big fleet: worker 2 beats every 15 s, so not in this bucket
    beat(history, 1, cpu=12.0, rss=110, agents=5)
    clock.now += 10
    beat(history, 2, cpu=40.0, rss=210, agents=7)
    beat(history, 1, cpu=14.0, rss=120, agents=5)
    rows = [(p.workers, p.cpu_percent, p.rss_bytes, p.agents) for p in history.cluster()]
    assert rows == [(2, 30.0, 300, 12), (2, 32.0, 310, 12), (2, 54.0, 330, 12)]


def test_a_worker_that_leaves_counts_in_that_bucket_and_not_after():
    clock = Clock(1_000_000.0)
    history = WorkerHistory(bucket_s=10, clock=clock)
    beat(history, 1, cpu=10.0, agents=5)
    beat(history, 2, cpu=20.0, agents=7)
    clock.now += 3
    history.leave(2)  # went offline after beating in this bucket: its point stays counted
    beat(history, 1, cpu=30.0, agents=5)
    [first] = history.cluster()
    assert (first.workers, first.cpu_percent, first.agents) == (2, 40.0, 12)
    clock.now += 2
    beat(history, 2, cpu=60.0, agents=7)  # back in the same bucket: counted once
    [first] = history.cluster()
    assert (first.workers, first.cpu_percent, first.agents) == (2, 20.0 + 40.0, 12)
    history.leave(2)
    clock.now += 10
    beat(history, 1, cpu=10.0, agents=5)
    assert [(p.workers, p.agents) for p in history.cluster()] == [(2, 12), (1, 5)]
    history.drop(1)  # removed: its series is gone, and its share of the bucket with it
    assert history.cluster()[-1].workers == 0 and history.cluster()[-1].agents == 0


def test_prune_forgets_workers_silent_for_the_whole_window_and_recomputes_totals():
    clock = Clock()
    history = WorkerHistory(bucket_s=10, window_s=100, clock=clock)
    beat(history, 1)
    beat(history, 2, cpu=1.0)
    history.leave(1)
    clock.now += 50
    assert history.prune() == 0  # still in the window
    clock.now += 100
    assert history.prune() == 1
    assert 1 not in history and 2 in history  # 2 is live: kept even though quiet
    beat(history, 2, cpu=3.0)
    assert history.cluster()[-1].cpu_percent == 3.0


def test_memory_stays_bounded_for_a_large_fleet():
    clock = Clock()
    history = WorkerHistory(bucket_s=10, window_s=3600, clock=clock)
    # 100 workers beating every 5 s for more than an hour: each ring stops at 360 buckets.
    for _ in range(4000 // 5):
        for wid in range(1, 101):
            beat(history, wid, llm=wid)
        clock.now += 5
    assert {len(w.ring.data) for w in history._workers.values()} == {360 * 7}
    assert len(history.cluster()) <= history.points
    # A fleet beating less often than once a bucket holds fewer buckets (one per beat).
    sparse = WorkerHistory(bucket_s=10, window_s=3600, clock=clock)
    for _ in range(3600 // 30):
        beat(sparse, 1)
        clock.now += 30
    assert len(sparse._workers[1].ring) == 120


def test_the_routes_level_names_are_logging_levels():
    # The REST route maps its `level` with logging's names: each must exist.
    for name in get_args(LogLevel):
        assert isinstance(logging.getLevelNamesMapping()[name.upper()], int)
