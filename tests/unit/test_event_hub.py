import asyncio
import json

from backend.events.hub import SUBSCRIBER_QUEUE_SIZE, EventHub


async def test_seq_is_global_and_topics_filter():
    hub = EventHub()
    cluster = hub.subscribe({"cluster"})
    sim = hub.subscribe({"simulation:1"})
    hub.publish("cluster", "worker.updated", {"n": 1})
    hub.publish("simulation:1", "round.completed", {"n": 2})
    hub.publish("cluster", "worker.updated", {"n": 3})
    got = [json.loads(cluster.queue.get_nowait()) for _ in range(cluster.queue.qsize())]
    assert [e["seq"] for e in got] == [1, 3]
    assert [e["payload"]["n"] for e in got] == [1, 3]
    assert json.loads(sim.queue.get_nowait())["type"] == "round.completed"
    assert hub.seq == 3


async def test_slow_subscriber_is_dropped_not_buffered_forever():
    hub = EventHub()
    slow = hub.subscribe({"cluster"})
    for i in range(SUBSCRIBER_QUEUE_SIZE + 5):
        hub.publish("cluster", "worker.updated", {"i": i})
    assert slow.overflowed.is_set()
    assert slow.queue.qsize() == SUBSCRIBER_QUEUE_SIZE
    hub.publish("cluster", "worker.updated", {})
    assert slow.queue.qsize() == SUBSCRIBER_QUEUE_SIZE  # unsubscribed: nothing more queued
    await asyncio.sleep(0)
