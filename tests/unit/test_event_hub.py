import asyncio
import json

from backend.events.hub import SUBSCRIBER_QUEUE_SIZE, EventHub
from tests.support_events import event_on, round_completed, workers_updated


async def test_seq_is_global_and_topics_filter():
    hub = EventHub()
    cluster = hub.subscribe({"cluster"})
    sim = hub.subscribe({"simulation:1"})
    hub.publish(workers_updated(1))
    hub.publish(round_completed(1, 2))
    hub.publish(workers_updated(3))
    got = [json.loads(cluster.queue.get_nowait()) for _ in range(cluster.queue.qsize())]
    assert [e["seq"] for e in got] == [1, 3]
    assert [e["payload"]["workers"][0]["id"] for e in got] == [1, 3]
    assert json.loads(sim.queue.get_nowait())["type"] == "round.completed"
    assert hub.seq == 3


async def test_slow_subscriber_is_dropped_not_buffered_forever():
    hub = EventHub()
    slow = hub.subscribe({"cluster"})
    for i in range(SUBSCRIBER_QUEUE_SIZE + 5):
        hub.publish(workers_updated(i))
    assert slow.overflowed.is_set()
    assert slow.queue.qsize() == SUBSCRIBER_QUEUE_SIZE
    hub.publish(workers_updated())
    assert slow.queue.qsize() == SUBSCRIBER_QUEUE_SIZE  # unsubscribed: nothing more queued
    await asyncio.sleep(0)


def _seqs(messages):
    return [json.loads(m)["seq"] for m in messages]


def test_reconnect_with_since_gets_exactly_the_missed_events_of_its_topics():
    hub = EventHub()
    for i in range(6):
        hub.publish(event_on("cluster" if i % 2 == 0 else "population:3"))
    sub = hub.subscribe({"cluster"}, since=2, epoch=hub.epoch)
    assert not sub.must_resync
    assert _seqs(sub.backlog) == [3, 5]  # seq 4 and 6 are population:3
    # New events go to the queue only, never also into the backlog.
    hub.publish(event_on("cluster"))
    assert _seqs(sub.backlog) == [3, 5]
    assert json.loads(sub.queue.get_nowait())["seq"] == 7


def test_since_equal_to_the_current_seq_replays_nothing():
    hub = EventHub()
    hub.publish(event_on("cluster"))
    assert hub.subscribe({"cluster"}, since=1).backlog == []
    assert EventHub().subscribe({"cluster"}, since=0).backlog == []


def test_without_since_there_is_no_backlog():
    hub = EventHub()
    hub.publish(event_on("cluster"))
    sub = hub.subscribe({"cluster"})
    assert sub.backlog == [] and not sub.must_resync


def test_resync_when_the_gap_was_evicted_from_the_buffer():
    hub = EventHub(replay_size=5)
    for _ in range(12):
        hub.publish(event_on("cluster"))
    assert hub.oldest_buffered_seq == 8
    assert hub.subscribe({"cluster"}, since=6).must_resync  # seq 7 is gone
    assert _seqs(hub.subscribe({"cluster"}, since=7).backlog) == [8, 9, 10, 11, 12]


def test_busy_other_topics_do_not_force_a_resync():
    hub = EventHub(replay_size=5)
    hub.publish(round_completed(1, 1))  # seq 1
    for _ in range(20):  # heartbeats push seq 1 (and many more) out of the buffer
        hub.publish(workers_updated())
    hub.publish(round_completed(1, 2))  # seq 22
    quiet = hub.subscribe({"simulation:1"}, since=1)
    assert not quiet.must_resync
    assert _seqs(quiet.backlog) == [22]
    assert hub.subscribe({"simulation:1"}, since=0).must_resync  # it did miss seq 1
    assert hub.subscribe({"simulation:*"}, since=0).must_resync
    assert hub.subscribe({"cluster"}, since=3).must_resync


def test_eviction_tracking_stays_bounded(monkeypatch):
    from backend.events import hub as hub_module

    monkeypatch.setattr(hub_module, "EVICTED_TOPICS_MAX", 3)
    hub = EventHub(replay_size=1)
    for i in range(10):
        hub.publish(event_on(f"population:{i}"))
    assert len(hub._evicted) <= 3
    # Conservative past the floor: a seq before it resyncs, whatever the topic.
    assert hub.subscribe({"population:99"}, since=1).must_resync
    assert not hub.subscribe({"population:99"}, since=9).must_resync


def test_resync_when_the_seq_or_epoch_is_from_another_run_of_the_manager():
    hub = EventHub()
    hub.publish(event_on("cluster"))
    assert hub.subscribe({"cluster"}, since=50).must_resync
    assert hub.subscribe({"cluster"}, since=0, epoch="someone-else").must_resync
    assert not hub.subscribe({"cluster"}, since=0, epoch=hub.epoch).must_resync
    assert EventHub().epoch != hub.epoch


def test_wildcard_topics_match_every_topic_of_a_kind():
    hub = EventHub()
    sub = hub.subscribe({"population:*"})
    hub.publish(event_on("population:1"))
    hub.publish(event_on("cluster"))
    hub.publish(event_on("population:22"))
    hub.publish(event_on("simulation:1"))
    got = [json.loads(sub.queue.get_nowait())["topic"] for _ in range(sub.queue.qsize())]
    assert got == ["population:1", "population:22"]
    replayed = hub.subscribe({"population:*", "cluster"}, since=0).backlog
    assert _seqs(replayed) == [1, 2, 3]


def test_the_replay_buffer_is_bounded():
    hub = EventHub(replay_size=100)
    for _ in range(1000):
        hub.publish(event_on("cluster"))
    assert len(hub._recent) == 100 and hub.oldest_buffered_seq == 901
