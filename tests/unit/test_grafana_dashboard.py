"""The Grafana dashboard in deploy/grafana asks only for series the code exports, from jobs the
Prometheus config scrapes, through the datasource Grafana is provisioned with."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from backend.metrics import ManagerMetrics
from worker_server.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "populace.json"
DATASOURCES = ROOT / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
# Our series' namespaces: populace_* and prometheus_client's process_* (CPU, RSS).
SERIES = re.compile(r"\b(?:populace|process)_[a-zA-Z0-9_]*")
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def exported() -> set[str]:
    """Every family name the manager's and a worker's registries expose."""
    names = set()
    for registry in (ManagerMetrics().registry, WorkerMetrics().registry):
        names.update(family.name for family in registry.collect())
    return names


def panels() -> list[dict]:
    found = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))  # collapsed rows hold theirs
    return found


def exprs() -> list[str]:
    return [t["expr"] for p in panels() for t in p.get("targets", [])]


def series_in(expr: str) -> set[str]:
    return set(SERIES.findall(QUOTED.sub('""', expr)))  # not inside label values


def is_exported(name: str, names: set[str]) -> bool:
    if name in names:
        return True
    return any(name.endswith(s) and name[: -len(s)] in names for s in SUFFIXES)


def test_the_registries_expose_the_series_the_issue_names() -> None:
    names = exported()
    for name in (
        "populace_cluster_workers",
        "populace_cluster_agents",
        "populace_cluster_capacity",
        "populace_rounds_started",
        "populace_rounds_finished",
        "populace_round_duration_seconds",
        "populace_decisions",
        "populace_llm_requests",
        "populace_llm_latency_seconds",
        "populace_llm_tokens",
        "populace_llm_errors",
        "populace_llm_late",
        "populace_heartbeat_gap_seconds",
        "populace_event_subscribers",
        "populace_event_subscribers_dropped",
        "populace_deploy_agents",
        "populace_cleanup_agents",
        "populace_db_commit_seconds",
        "populace_worker_agents",
        "populace_worker_capacity",
        "populace_worker_rounds",
        "populace_worker_decisions",
        "populace_worker_llm_requests",
        "populace_worker_llm_latency_seconds",
        "populace_worker_llm_inflight_calls",
        "process_cpu_seconds",
        "process_resident_memory_bytes",
    ):
        assert name in names, name


@pytest.mark.parametrize("expr", exprs())
def test_every_query_asks_for_exported_series_only(expr: str) -> None:
    names = exported()
    used = series_in(expr)
    assert used, f"no populace series in {expr!r}"
    unknown = sorted(n for n in used if not is_exported(n, names))
    assert not unknown, f"{expr!r} asks for series no registry exports: {unknown}"


def test_the_checker_catches_a_series_nobody_exports() -> None:
    names = exported()
    assert not is_exported("populace_rounds_finishd_total", names)
    assert not is_exported("populace_worker_gpu_seconds_bucket", names)
    assert series_in('rate(populace_x_total{job="populace_y"}[1m])') == {"populace_x_total"}


def test_queries_name_jobs_prometheus_scrapes_and_the_provisioned_datasource() -> None:
    jobs = {c["job_name"] for c in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]}
    for expr in exprs():
        for job in re.findall(r'job="([^"]+)"', expr):
            assert job in jobs, f"{expr!r} names job {job!r}; Prometheus scrapes {jobs}"
    (source,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    for panel in panels():
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == source["uid"], panel["title"]


def test_the_dashboard_covers_the_cluster_and_the_runs() -> None:
    titles = " | ".join(p["title"] for p in panels()).lower()
    for needed in (
        "workers",
        "agents",
        "capacity",
        "cpu",
        "rss",
        "heartbeat",
        "event hub",
        "rounds",
        "round duration",
        "decisions",
        "llm requests",
        "latency",
        "tokens",
        "errors",
        "late",
    ):
        assert needed in titles, needed
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids)), "panel ids are unique"


def test_the_manager_scrape_uses_a_credentials_file_never_an_inline_token() -> None:
    (manager,) = [
        c
        for c in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]
        if c["job_name"] == "populace-manager"
    ]
    assert manager["metrics_path"] == "/api/metrics"
    assert manager["authorization"]["credentials_file"]
    assert "credentials" not in manager["authorization"]
