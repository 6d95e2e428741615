"""The event catalog: every event the manager publishes is one of its models, each model knows
its topic, a payload read back is the event sent, and the wire keeps its shape."""

from __future__ import annotations

import ast
import json
from dataclasses import fields

from backend.events.catalog import (
    BY_TYPE,
    EVENTS,
    Event,
    Hello,
    PopulationProgress,
    RoundCompleted,
    SimulationFault,
    SweepRun,
    WorkerUpdated,
    parse,
    system_message,
)
from backend.events.hub import EventHub
from backend.simulations.outcome import RoundOutcome
from backend.workers.schemas import WorkerOut
from tests.support import ROOT
from tests.support_events import round_completed, simulation_updated, workers_updated


def _publish_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted((ROOT / "backend").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "publish"
            ):
                calls.append((f"{path.relative_to(ROOT)}:{node.lineno}", node))
    return calls


def test_every_publish_hands_over_one_event_object_never_strings():
    calls = _publish_calls()
    assert len(calls) >= 15  # the walk found the publishers
    for where, call in calls:
        assert len(call.args) == 1 and not call.keywords, where
        assert not isinstance(call.args[0], (ast.Constant, ast.JoinedStr, ast.Dict)), where


def _concrete_events(cls: type[Event]) -> set[type[Event]]:
    found = set()
    for sub in cls.__subclasses__():
        if "event_type" in sub.__dict__:
            found.add(sub)
        found |= _concrete_events(sub)
    return found


def test_every_event_model_of_the_manager_is_in_the_catalog():
    import backend.app  # noqa: F401  (every module that could define an event)

    ours = {e for e in _concrete_events(Event) if e.__module__.startswith("backend.")}
    assert ours == set(EVENTS)
    assert len(BY_TYPE) == len(EVENTS)  # one model per type


def test_each_event_goes_out_on_the_topic_of_its_ids():
    hub, seen = EventHub(), []
    hub.observe(seen.append)
    sub = hub.subscribe({"simulation:*", "sweep:*", "population:*", "cluster"})
    events = [
        simulation_updated(7, "running"),
        SweepRun(
            sweep_id=3,
            point=1,
            simulation_id=7,
            population_id=2,
            status="running",
            current_round=0,
            rounds=3,
        ),
        PopulationProgress(population_id=2, stage="sampled", done=1, total=1),
        workers_updated(1),
    ]
    for event in events:
        hub.publish(event)
    sent = [json.loads(sub.queue.get_nowait()) for _ in events]
    assert [m["topic"] for m in sent] == ["simulation:7", "sweep:3", "population:2", "cluster"]
    assert [m["type"] for m in sent] == [e.event_type for e in events]
    assert [e.topic.partition(":")[0] for e in events] == [e.topic_kind for e in events]
    assert seen == events  # observers get the objects themselves


def test_a_message_read_back_is_the_event_that_was_sent():
    hub = EventHub()
    sub = hub.subscribe({"simulation:*"})
    sent = round_completed(4, 2, mean=41.5, endpoints=[_meter()])
    hub.publish(sent)
    got = parse(sub.queue.get_nowait())
    assert got is not None and got.payload == sent and got.seq == 1
    assert parse(system_message("ping")) is None
    assert (
        parse('{"type": "something.new", "topic": "cluster", "seq": 1, "ts": "", "payload": {}}')
        is None
    )
    message = {"type": "simulation.fault", "topic": "simulation:1", "seq": 9, "ts": "t"}
    assert parse({**message, "payload": {"simulation_id": 1}}) is None  # not what the model says
    fault = parse({**message, "payload": {"simulation_id": 1, "round": 2, "message": "m"}})
    assert fault is not None and fault.payload == SimulationFault(
        simulation_id=1, round=2, message="m"
    )
    assert parse({**message, "payload": fault.payload.payload()}, only=(RoundCompleted,)) is None


def _meter() -> dict:
    return {
        "base_url": "http://llm:8081",
        "model": "m",
        "requests": 3,
        "errors": 0,
        "skipped": 0,
        "late": 0,
        "prompt_tokens": 30,
        "completion_tokens": 3,
        "cached_tokens": 0,
        "latency_p50_s": 0.5,
        "latency_p95_s": 0.9,
        "latency_mean_s": 0.6,
        "requests_per_s": 1.5,
        "cost_usd": None,
        "last_error": "",
        "breaker_opened": 0,
        "breaker_half_opened": 0,
        "breaker_closed": 0,
        "latency_counts": [0, 3],
        "latency_sum_s": 1.8,
        "duration_s": 2.0,
    }


def test_a_round_completed_carries_exactly_a_rounds_statistics():
    # A field added to RoundOutcome.stats() must be added to the event (its model refuses it).
    kept = {f.name for f in fields(RoundOutcome)} - {"groups", "group_metrics"}
    extra = {"simulation_id", "rounds", "participation", "parse_failure_rate"}
    assert set(RoundCompleted.model_fields) == kept | extra
    # A meter goes out whole: the raw buckets too (backend.metrics adds rounds up from them).
    assert round_completed(1, 1, endpoints=[_meter()]).payload()["endpoints"] == [_meter()]


def test_a_sparse_event_says_only_what_its_publisher_set():
    deleting = PopulationProgress(population_id=3, stage="deleting", agents=10)
    assert deleting.payload() == {"population_id": 3, "stage": "deleting", "agents": 10}
    # The others carry every field, null or not.
    assert simulation_updated(1, "paused").payload()["pause_reason"] is None


def test_a_worker_update_carries_the_worker_as_the_api_shows_it():
    worker = WorkerOut(
        id=1,
        node="n",
        address="127.0.0.1:1",
        pid=1,
        state="online",
        agents=0,
        capacity=10,
        cpu_percent=0.0,
        rss_bytes=0,
        inflight_llm_calls=0,
        version="v",
        registered_at="2026-01-01T00:00:00",
        last_heartbeat="2026-01-01T00:00:00",
    )
    assert WorkerUpdated(worker=worker).payload() == {"worker": worker.model_dump(mode="json")}


def test_the_sockets_own_messages():
    assert json.loads(system_message("ping")) == {"type": "ping", "topic": "system"}
    hello = Hello(topics=["cluster"], epoch="e", ping_interval_s=5.0)
    assert json.loads(system_message("hello", 3, hello)) == {
        "type": "hello",
        "topic": "system",
        "seq": 3,
        "payload": {"topics": ["cluster"], "epoch": "e", "ping_interval_s": 5.0},
    }
