"""Reconnecting to /ws/events with `since`: a real manager, real workers, real websocket clients."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import InvalidStatus

from tests.support import Manager, stop_process, wait_for


@pytest.fixture(scope="module")
def live_manager(tmp_path_factory):
    """One manager with two worker processes heartbeating: a steady stream of cluster events."""
    tmp = tmp_path_factory.mktemp("replay")
    manager = Manager(tmp=tmp, database_url=f"sqlite+aiosqlite:///{tmp}/populace.db").start()
    workers = manager.start_workers(procs=2)
    try:
        wait_for(lambda: len(manager.workers()) == 2, timeout=60, what="two workers")
        yield manager
    finally:
        stop_process(workers)
        manager.stop()


def _connect(manager, topics="cluster", token=None, **params):
    return manager.events(open_timeout=5, token=token, topics=topics, **params)


def _recv(ws, timeout=10.0) -> dict:
    return json.loads(ws.recv(timeout=timeout))


def _recv_until(ws, seq: int) -> list[dict]:
    """Every message up to and including the one with `seq`."""
    got = []
    while not got or got[-1]["seq"] < seq:
        got.append(_recv(ws))
    return got


def test_reconnect_with_since_gets_every_missed_event_once(live_manager):
    manager = live_manager
    # The observer stays connected throughout: the reference for what the client should see.
    with _connect(manager) as observer:
        start = _recv(observer)
        assert start["type"] == "hello" and start["payload"]["epoch"]
        epoch = start["payload"]["epoch"]

        with _connect(manager) as client:
            assert _recv(client)["type"] == "hello"
            before = [_recv(client) for _ in range(3)]
        last_seen = before[-1]["seq"]

        # While the client is away, heartbeats keep coming (one a second from each worker).
        reference = _recv_until(observer, last_seen)
        reference += [_recv(observer) for _ in range(4)]
        gap_end = reference[-1]["seq"]

        with _connect(manager, since=last_seen, epoch=epoch) as client:
            hello = _recv(client)
            assert hello["type"] == "hello"
            assert hello["payload"]["since"] == last_seen
            assert hello["payload"]["replayed"] >= gap_end - last_seen
            after = _recv_until(client, gap_end)
            after += [_recv(client) for _ in range(2)]  # and then live events, seamlessly
        reference += _recv_until(observer, after[-1]["seq"])

    seen = [e["seq"] for e in before + after]
    assert len(seen) == len(set(seen)), "no event twice"
    assert seen == [e["seq"] for e in reference if start["seq"] < e["seq"] <= after[-1]["seq"]]
    assert seen == list(range(start["seq"] + 1, after[-1]["seq"] + 1)), (
        "only cluster events: no gaps"
    )
    assert all(e["type"] in ("worker.updated", "workers.updated") for e in before + after)
    replayed = after[: hello["payload"]["replayed"]]
    assert [e["seq"] for e in replayed] == list(range(last_seen + 1, last_seen + 1 + len(replayed)))


def test_replay_is_filtered_by_topic_including_wildcards(live_manager):
    manager = live_manager
    with _connect(manager) as ws:
        hello = _recv(ws)
        first = _recv(ws)
    # Nothing but cluster events were published, so a population subscriber misses nothing.
    for topics in ("population:1", "population:*"):
        with _connect(manager, topics=topics, since=hello["seq"]) as ws:
            got = _recv(ws)
            assert got["type"] == "hello" and got["payload"]["replayed"] == 0
    with _connect(manager, topics="population:*,cluster", since=hello["seq"]) as ws:
        assert _recv(ws)["payload"]["replayed"] >= 1
        assert _recv(ws)["seq"] == first["seq"]


def test_a_seq_the_manager_does_not_hold_gets_one_resync(live_manager):
    manager = live_manager
    with _connect(manager) as ws:
        hello = _recv(ws)
    # A seq from the future (another run of the manager counted further).
    with _connect(manager, since=hello["seq"] + 1000) as ws:
        first = _recv(ws)
        assert first["type"] == "hello" and first["payload"]["replayed"] is None
        resync = _recv(ws)
        assert resync["type"] == "resync" and resync["seq"] == first["seq"]
        assert resync["payload"]["since"] == hello["seq"] + 1000
        assert "refetch" in resync["payload"]["reason"]
    # The right seq but another epoch.
    with _connect(manager, since=hello["seq"], epoch="0123abcd") as ws:
        _recv(ws)
        assert _recv(ws)["type"] == "resync"


def test_after_a_manager_restart_an_old_seq_resyncs(manager):
    manager.start_workers(procs=1)
    with _connect(manager) as ws:
        hello = _recv(ws)
        last = _recv(ws)  # a registration or heartbeat
    manager.stop()
    manager.start()
    wait_for(lambda: manager.workers(), timeout=30, what="the worker re-registered")
    # The new run's seq may well have passed ours already: only the epoch tells them apart.
    with _connect(manager) as ws:
        wait_for(lambda: _recv(ws)["seq"] > last["seq"], timeout=30, what="seq past ours")
    with _connect(manager, since=last["seq"], epoch=hello["payload"]["epoch"]) as ws:
        new_hello = _recv(ws)
        assert new_hello["payload"]["epoch"] != hello["payload"]["epoch"]
        assert _recv(ws)["type"] == "resync"


@pytest.mark.parametrize(
    "params",
    [{"since": "-1"}, {"since": "abc"}, {"topics": "cluster*"}, {"topics": "population:x"}],
)
def test_bad_parameters_are_refused_at_the_handshake(live_manager, params):
    with pytest.raises(InvalidStatus) as refused:
        _connect(live_manager, **params)
    assert refused.value.response.status_code == 403


def test_a_bad_token_is_refused_even_with_since(live_manager):
    with pytest.raises(InvalidStatus) as refused:
        _connect(live_manager, since=0, token="wrong")
    assert refused.value.response.status_code == 403
