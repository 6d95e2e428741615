"""What the manager's and a worker's metrics count, from the events and hooks that feed them:
rounds once each, deploy and delete progress that goes away when done, commits of a real
SQLite engine, a worker's metrics port (served, refused when taken, per process on a node),
and the metrics token's rules."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr, ValidationError
from sqlalchemy import text

from backend.db.session import make_engine
from backend.events.catalog import PopulationProgress
from backend.events.hub import EventHub
from backend.metrics import ManagerMetrics
from backend.settings import ManagerSettings
from backend.tokens import ensure_tokens, metrics_token
from tests.support import free_port
from tests.support_events import event_on, round_completed, round_progress, simulation_updated
from worker_server.exit_codes import ExitCode
from worker_server.metrics import WorkerMetrics
from worker_server.metrics import serve as serve_metrics
from worker_server.node import child_env
from worker_server.process import WorkerProcess
from worker_server.settings import WorkerSettings


def value(registry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def observed() -> tuple[EventHub, ManagerMetrics]:
    hub = EventHub()
    metrics = ManagerMetrics(hub)
    hub.observe(metrics.on_event)
    return hub, metrics


def test_a_round_counts_once_however_many_progress_events_it_sends() -> None:
    hub, metrics = observed()
    for answered in (0, 10, 50):
        hub.publish(round_progress(1, 1, answered))
    hub.publish(round_progress(2, 1))
    hub.publish(round_progress(1, 2))
    assert value(metrics.registry, "populace_rounds_started_total") == 3
    hub.publish(
        round_completed(
            1,
            2,
            n_valid=7,
            n_invalid=2,
            n_late=1,
            n_lost=0,
            duration_s=1.5,
            endpoints=[
                {
                    "base_url": "http://user:pw@llm:8081",
                    "model": "m",
                    "requests": 9,
                    "errors": 2,
                    "late": 1,
                    "prompt_tokens": 90,
                    "completion_tokens": 9,
                    "latency_counts": [0] * 20 + [7] + [0] * 21,
                    "latency_sum_s": 3.5,
                }
            ],
        )
    )
    r = metrics.registry
    assert value(r, "populace_rounds_finished_total") == 1
    assert value(r, "populace_decisions_total", status="valid") == 7
    assert value(r, "populace_decisions_total", status="late") == 1
    assert value(r, "populace_round_duration_seconds_sum") == 1.5
    endpoint = {"base_url": "http://llm:8081", "model": "m"}  # no credentials in a label
    assert value(r, "populace_llm_requests_total", **endpoint) == 9
    assert value(r, "populace_llm_errors_total", **endpoint) == 2
    assert value(r, "populace_llm_tokens_total", kind="prompt", **endpoint) == 90
    assert value(r, "populace_llm_latency_seconds_count", **endpoint) == 7
    assert value(r, "populace_llm_latency_seconds_bucket", le="+Inf", **endpoint) == 7
    assert value(r, "populace_llm_latency_seconds_bucket", le="0.001", **endpoint) == 0

    # A run that ends forgets its round; resumed, its next round counts as started.
    hub.publish(simulation_updated(1, "paused"))
    hub.publish(round_progress(1, 2))
    assert value(r, "populace_rounds_started_total") == 4
    assert value(r, "populace_runs_ended_total", status="paused") == 1


def test_deploy_and_delete_progress_show_while_they_run_and_go_away() -> None:
    hub, metrics = observed()
    r = metrics.registry
    population = 4
    for stage, done in (("sampled", 100), ("persisted", 50), ("created", 20)):
        hub.publish(PopulationProgress(population_id=population, stage=stage, done=done, total=100))
    assert value(r, "populace_deploy_agents", population_id="4", stage="persisted") == 50
    assert value(r, "populace_deploy_target_agents", population_id="4") == 100
    hub.publish(PopulationProgress(population_id=population, stage="deployed", done=100, total=100))
    assert value(r, "populace_deploy_agents", population_id="4", stage="created") is None
    assert value(r, "populace_deploy_target_agents", population_id="4") is None
    assert value(r, "populace_agents_deployed_total") == 100
    assert value(r, "populace_deploys_total", outcome="deployed") == 1

    hub.publish(PopulationProgress(population_id=population, stage="deleting", agents=100))
    assert value(r, "populace_cleanup_agents", population_id="4") == 100
    hub.publish(
        PopulationProgress(
            population_id=population,
            stage="deleted",
            workers_cleaned=2,
            workers_orphaned=0,
            agents_removed=100,
        )
    )
    assert value(r, "populace_cleanup_agents", population_id="4") is None
    assert value(r, "populace_agents_removed_total") == 100
    # A delete that undoes a failed deploy is a delete, not a second failed deploy.
    assert value(r, "populace_deploys_total", outcome="failed") is None


def test_the_hub_counts_subscribers_and_the_ones_it_drops() -> None:
    hub, metrics = observed()
    slow = hub.subscribe({"cluster"})
    hub.subscribe({"sweep:1"})
    assert value(metrics.registry, "populace_event_subscribers") == 2
    for _ in range(slow.queue.maxsize + 1):
        hub.publish(event_on("cluster"))
    assert slow.overflowed.is_set()
    assert value(metrics.registry, "populace_event_subscribers") == 1
    assert value(metrics.registry, "populace_event_subscribers_dropped_total") == 1


async def test_commits_of_the_apps_engine_are_timed_and_rollbacks_are_not(tmp_path) -> None:
    metrics = ManagerMetrics()
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path}/m.db")
    metrics.watch_engine(engine)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER)"))
        with pytest.raises(RuntimeError):
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO t VALUES (1)"))
                raise RuntimeError("rolled back")
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (2)"))
    finally:
        await engine.dispose()
    assert value(metrics.registry, "populace_db_commit_seconds_count") == 2
    # Another app's metrics see none of this engine's commits.
    assert value(ManagerMetrics().registry, "populace_db_commit_seconds_count") == 0


def test_a_worker_serves_its_metrics_on_the_port_it_was_given() -> None:
    metrics = WorkerMetrics()
    port = free_port()
    server = serve_metrics(metrics, "127.0.0.1", port)
    try:
        text_ = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        names = {f.name for f in text_string_to_metric_families(text_)}
        assert {"populace_worker_rounds", "process_resident_memory_bytes"} <= names
    finally:
        server.shutdown()
        server.server_close()


async def test_a_worker_whose_metrics_port_is_taken_stops_with_bind_failed(capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = WorkerSettings(
            manager_url=f"http://127.0.0.1:{free_port()}",
            join_token="tok",
            port=0,
            procs=1,
            metrics_port=port,
        )
        code = await asyncio.wait_for(WorkerProcess(settings).run(), 60)
    assert code == ExitCode.BIND_FAILED
    assert f"cannot serve metrics on 127.0.0.1:{port}" in capsys.readouterr().err


def test_each_process_of_a_node_gets_its_own_metrics_port() -> None:
    settings = WorkerSettings(join_token="tok", procs=2, metrics_port=9101, metrics_host="10.0.0.5")
    env = child_env(settings, port=0, base_env={}, metrics_port=9102)
    assert env["POPULACE_METRICS_PORT"] == "9102"
    assert env["POPULACE_METRICS_HOST"] == "10.0.0.5"
    assert child_env(settings, port=0, base_env={})["POPULACE_METRICS_PORT"] == "0"


def test_the_metrics_token_is_its_own_and_read_from_the_data_dir(tmp_path) -> None:
    with pytest.raises(ValidationError, match="metrics_token must differ"):
        ManagerSettings(api_token=SecretStr("same"), metrics_token=SecretStr("same"))
    with pytest.raises(ValidationError, match="metrics_token must not be empty"):
        ManagerSettings(metrics_token=SecretStr("  "))

    settings = ManagerSettings(data_dir=tmp_path)
    token, path, created = metrics_token(settings)
    assert created and path == tmp_path / "metrics_token"
    assert path.stat().st_mode & 0o777 == 0o600
    assert metrics_token(settings)[:2] == (token, path)  # made once
    loaded = ensure_tokens(settings, announce=lambda _: None)
    assert loaded.metrics_token.get_secret_value() == token
