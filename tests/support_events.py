"""Events of the catalog (backend.events.catalog) with every field a test does not care about
filled in, so a test says only what it is about."""

from __future__ import annotations

from typing import Any

from backend.events.catalog import (
    CLUSTER,
    Event,
    PopulationProgress,
    RoundCompleted,
    RoundProgress,
    SimulationDeleted,
    SimulationUpdated,
    SweepDeleted,
    WorkerStats,
    WorkersUpdated,
)


def simulation_updated(simulation_id: int, status: str, **fields: Any) -> SimulationUpdated:
    defaults: dict[str, Any] = {
        "population_id": 1,
        "rounds": 3,
        "current_round": 0,
        "error": None,
        "stop_reason": None,
        "pause_reason": None,
        "cancel_reason": None,
        "lost_agents": 0,
        "rounds_below_floor": 0,
        "started_at": None,
        "finished_at": None,
    }
    return SimulationUpdated(simulation_id=simulation_id, status=status, **{**defaults, **fields})


def round_progress(simulation_id: int, number: int, answered: int = 0) -> RoundProgress:
    return RoundProgress(
        simulation_id=simulation_id, round=number, rounds=3, answered=answered, total=100
    )


def round_completed(simulation_id: int, number: int, **fields: Any) -> RoundCompleted:
    defaults: dict[str, Any] = {
        "rounds": 3,
        "n_valid": 0,
        "n_invalid": 0,
        "n_late": 0,
        "n_lost": 0,
        "mean": None,
        "median": None,
        "std": None,
        "min": None,
        "max": None,
        "target": None,
        "winner_value": None,
        "winner_count": 0,
        "winner_agents": [],
        "histogram": [],
        "segments": {},
        "prompt_tokens": 0,
        "cached_prompt_tokens": 0,
        "completion_tokens": 0,
        "llm_errors": 0,
        "llm_requests": 0,
        "network_bytes": 0,
        "duration_s": 0.0,
        "metrics": {},
        "endpoints": [],
        "metrics_by_policy": {},
        "participation": None,
        "parse_failure_rate": None,
    }
    return RoundCompleted(simulation_id=simulation_id, round=number, **{**defaults, **fields})


def workers_updated(*ids: int) -> WorkersUpdated:
    return WorkersUpdated(
        workers=[
            WorkerStats(
                id=worker_id,
                agents=0,
                capacity=100,
                cpu_percent=0.0,
                rss_bytes=0,
                inflight_llm_calls=0,
                last_heartbeat="2026-01-01T00:00:00+00:00",
            )
            for worker_id in ids
        ]
    )


def event_on(topic: str) -> Event:
    """Some event on this topic, for tests of the hub's delivery (what it says is no matter)."""
    if topic == CLUSTER:
        return workers_updated()
    kind, _, number = topic.partition(":")
    if kind == "population":
        return PopulationProgress(population_id=int(number), stage="deleting", agents=0)
    if kind == "simulation":
        return SimulationDeleted(simulation_id=int(number))
    if kind == "sweep":
        return SweepDeleted(sweep_id=int(number))
    raise ValueError(f"no event on topic {topic!r}")
