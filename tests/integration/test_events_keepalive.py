"""The event socket's keep-alive: a quiet socket still hears a `ping` every few seconds (so a
client can tell a dead connection from a quiet one), and pings take no part in replay."""

from __future__ import annotations

import json

from backend.api.events_ws import PING_INTERVAL_S


def _recv(ws, timeout: float) -> dict:
    return json.loads(ws.recv(timeout=timeout))


def test_a_quiet_socket_gets_pings_without_a_seq_and_replay_ignores_them(shared_manager):
    manager = shared_manager
    with manager.events(topics="sweep:999999") as ws:  # a topic nothing publishes on
        hello = _recv(ws, 10)
        assert hello["type"] == "hello"
        assert hello["payload"]["ping_interval_s"] == PING_INTERVAL_S
        ping = _recv(ws, PING_INTERVAL_S * 3)
        assert ping == {"type": "ping", "topic": "system"}  # no seq: nothing to replay
        assert _recv(ws, PING_INTERVAL_S * 3)["type"] == "ping"
    epoch = hello["payload"]["epoch"]
    with manager.events(topics="sweep:999999", since=hello["seq"], epoch=epoch) as ws:
        resumed = _recv(ws, 10)
        assert resumed["type"] == "hello" and resumed["payload"]["replayed"] == 0, resumed
        assert _recv(ws, PING_INTERVAL_S * 3)["type"] == "ping"
