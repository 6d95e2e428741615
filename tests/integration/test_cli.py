"""The `populace` command: help, schema migrations, the one-command demo, and the operator's
fault commands (pause, resume, repair) against a real manager and real workers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading

import httpx
import pytest
from alembic.script import ScriptDirectory

from backend.db.migrate import alembic_config
from tests.support import (
    Cli,
    Manager,
    descendants,
    empty_cluster,
    free_port,
    pid_alive,
    populace_cmd,
    stop_process,
    wait_for,
)
from tests.support_populations import deploy_population, population_yaml


def _run(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        populace_cmd(*args),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def test_help_lists_every_command():
    out = _run("--help")
    assert out.returncode == 0
    for command in ("manager", "worker", "demo", "db"):
        assert re.search(rf"^\W*{command}\b", out.stdout, re.MULTILINE), out.stdout
    worker_help = _run("worker", "--help").stdout
    for option in ("--manager", "--join-token", "--host", "--port", "--procs"):
        assert option in worker_help


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_db_upgrade_and_downgrade(backend, request, tmp_path):
    url = (
        f"sqlite+aiosqlite:///{tmp_path}/cli.db"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    env = {"POPULACE_DATABASE_URL": url}
    up = _run("db", "upgrade", env=env)
    assert up.returncode == 0, up.stderr
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    assert head and f"at revision {head}" in up.stdout
    down = _run("db", "downgrade", "base", env=env)
    assert down.returncode == 0, down.stderr
    assert "at revision base" in down.stdout


def test_bad_database_url_is_a_clear_cli_error():
    out = _run("db", "upgrade", env={"POPULACE_DATABASE_URL": "mysql://x/y"})
    assert out.returncode != 0
    assert "database_url" in out.stderr


def test_worker_without_join_token_is_a_clear_cli_error():
    env = {k: v for k, v in os.environ.items() if k != "POPULACE_JOIN_TOKEN"}
    out = subprocess.run(
        populace_cmd("worker", "--manager", "http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode != 0
    assert "join-token" in out.stderr


def test_demo_runs_manager_and_two_workers_and_ctrl_c_leaves_nothing(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POPULACE_")}
    demo = subprocess.Popen(
        populace_cmd("demo", "--port", str(port)),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(demo.stdout), daemon=True).start()
    try:
        token_line = wait_for(
            lambda: next((ln for ln in lines if "API token:" in ln), None),
            timeout=90,
            what="demo banner",
        )
        token = token_line.rsplit(":", 1)[1].strip()
        assert any(f"http://127.0.0.1:{port}/#token={token}" in ln for ln in lines)
        headers = {"Authorization": f"Bearer {token}"}

        def two_online():
            items = httpx.get(f"http://127.0.0.1:{port}/api/workers", headers=headers).json()[
                "items"
            ]
            return [w for w in items if w["state"] == "online"] if len(items) == 2 else None

        wait_for(two_online, timeout=60, what="two demo workers online")
        tree = [demo.pid, *descendants(demo.pid)]
        assert len(tree) >= 4, "demo, manager, worker supervisor and its processes"
        assert (tmp_path / "populace.db").is_file(), "the demo runs on SQLite in the working folder"

        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=30) == 0
        wait_for(lambda: not any(pid_alive(p) for p in tree), timeout=10, what="no process left")
    finally:
        if demo.poll() is None:
            demo.kill()


# --- pause, resume, repair --------------------------------------------------------------------

LEVEL_K = """
population_id: {pid}
name: {name}
rounds: {rounds}
rule: {{preset: "1/2+5"}}
policy:
  kind: level_k
  depth_attribute: education
  depth_by_category: {{high school: 0, bachelor: 1, doctorate: 2}}
  noise_std: 1.0
seed: 5
"""
# Each worker process hosts at most this many agents: two hold a population of 1,000, one
# holds only 600 of it.
CAPACITY = 600


def _start_small_cluster(factory, database_url: str) -> Manager:
    manager = factory(
        database_url=database_url, extra_env={"POPULACE_CAPACITY": str(CAPACITY)}
    ).start()
    for _ in range(2):
        manager.start_workers(procs=1)
    wait_for(lambda: len(manager.workers(state="online")) == 2, 60, what="two workers online")
    return manager


@pytest.fixture
def small_cluster(manager_factory, postgres_url):
    """A manager on Postgres and two worker nodes of one process each, 600 agents apiece,
    fresh for the test (the one that restarts the manager has it to itself)."""
    return _start_small_cluster(manager_factory, postgres_url)


@pytest.fixture(scope="module")
def shared_small_cluster(module_postgres_url, module_manager_factory):
    """The same cluster on a Postgres database of the module's own, started once for the
    operator tests that need only a clean one. (The database is asked for first, so it is
    dropped after the manager stops.)"""
    return _start_small_cluster(module_manager_factory, module_postgres_url)


@pytest.fixture
def clean_small_cluster(shared_small_cluster):
    """The shared cluster as a fresh one would be: no run going, no population, two workers
    online with all their room, in the store too (placement reads it)."""
    empty_cluster(shared_small_cluster, workers=2)
    return shared_small_cluster


def _one_line_refusal(run: subprocess.CompletedProcess, *phrases: str) -> None:
    """A refused request: non-zero exit, one line on stderr naming the 409 and its detail."""
    assert run.returncode != 0, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "409" in lines[0], lines[0]
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def _simulation(manager: Manager, sid: int) -> dict:
    with manager.api() as api:
        return api.get(f"/api/simulations/{sid}").json()


def _population(manager: Manager, pid: int) -> dict:
    with manager.api() as api:
        return api.get(f"/api/populations/{pid}").json()


def _listed(output: str, first_column: int) -> str:
    return next(ln for ln in output.splitlines() if ln.split()[:1] == [str(first_column)])


def test_cli_pauses_resumes_and_cancels_simulations(clean_small_cluster, tmp_path):
    manager = clean_small_cluster
    populace = Cli(manager)
    with manager.api() as api:
        config = population_yaml("three-educations", name="pausable")
        pid = deploy_population(api, config)["id"]
    slow = tmp_path / "slow.yaml"
    slow.write_text(
        f"population_id: {pid}\nname: slow run\nrounds: 4\n"
        "policy: {kind: synthetic, latency_s: 0.5}\nseed: 3\n"
    )

    started = populace("simulate", str(slow), "--no-wait")
    assert started.returncode == 0, started.stderr
    sid = int(started.stdout.split()[1])
    paused = populace("simulation", "pause", str(sid))
    assert paused.returncode == 0, paused.stderr
    assert re.fullmatch(
        rf"simulation {sid}: paused after round \d of 4 \(paused by an operator\)\n",
        paused.stdout,
    ), paused.stdout
    kept = _simulation(manager, sid)
    assert (kept["status"], kept["pause_reason"]) == ("paused", "paused by an operator")

    listed = populace("simulation", "list")
    assert listed.returncode == 0, listed.stderr
    row = _listed(listed.stdout, sid)
    assert " paused " in row and row.endswith("slow run  (paused: paused by an operator)"), row

    _one_line_refusal(
        populace("simulation", "pause", str(sid)), f"simulation {sid} is paused", "only a running"
    )

    resumed = populace("simulation", "resume", str(sid), "--follow", "--json")
    assert resumed.returncode == 0, resumed.stderr
    lines = resumed.stdout.strip().splitlines()
    assert lines[0] == (f"simulation {sid}: running from round {kept['current_round'] + 1} of 4"), (
        resumed.stdout
    )
    assert [ln.split(":")[0] for ln in lines if ln.startswith("round ")] == [
        f"round {n}" for n in range(1, 5)
    ], resumed.stdout
    summary = json.loads(lines[-1])
    assert summary["status"] == "completed" and summary["rounds_played"] == 4, summary
    assert summary["lost_agents"] == 0 and summary["pause_reason"] is None, summary

    # Finished runs neither resume, pause nor cancel: each refusal is one line and exit != 0.
    _one_line_refusal(
        populace("simulation", "resume", str(sid)), f"simulation {sid} is completed", "resumes"
    )
    _one_line_refusal(populace("simulation", "pause", str(sid)), "is completed")
    _one_line_refusal(populace("simulation", "cancel", str(sid)), "already completed")
    unknown = populace("simulation", "resume", "999999")
    assert unknown.returncode != 0 and "404" in unknown.stderr and "not found" in unknown.stderr

    # A run followed by `populace simulate` and paused meanwhile: the follower stops, says
    # why and how to go on, and exits non-zero; the paused run can still be cancelled.
    followed = populace.popen("simulate", str(slow), "--json")
    try:
        second = wait_for(
            lambda: next(
                (
                    s
                    for s in _simulations(manager, pid)
                    if s["id"] != sid and s["status"] == "running"
                ),
                None,
            ),
            60,
            what="the followed run running",
        )
        with manager.api() as api:
            assert api.post(f"/api/simulations/{second['id']}/pause").status_code == 200
        out, err = followed.communicate(timeout=120)
    finally:
        stop_process(followed)
    assert followed.returncode != 0, (out, err)
    assert json.loads(out.strip().splitlines()[-1])["status"] == "paused", out
    assert f"simulation {second['id']} paused after round" in err, err
    assert "paused by an operator" in err and f"populace simulation resume {second['id']}" in err

    cancelled = populace("simulation", "cancel", str(second["id"]))
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"simulation {second['id']}: cancelled" in cancelled.stdout
    _one_line_refusal(
        populace("simulation", "resume", str(second["id"])), "is cancelled", "only a paused"
    )


def _simulations(manager: Manager, pid: int) -> list[dict]:
    with manager.api() as api:
        return api.get("/api/simulations", params={"population_id": pid}).json()["items"]


def test_cli_repairs_a_degraded_population_and_lists_it_with_hosted_of_size(
    clean_small_cluster, tmp_path
):
    manager = clean_small_cluster
    populace = Cli(manager)
    with manager.api() as api:
        config = population_yaml("three-educations", name="repairable")
        pid = deploy_population(api, config)["id"]

    whole = populace("population", "repair", str(pid))
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.startswith(f"population {pid}: deployed, 1000 of 1000 agents hosted")

    # One of the two workers is removed: its 500 agents move to the other, which has room
    # for only 100 of them. 400 agents are hosted by no live worker.
    per_worker = _population(manager, pid)["agents_per_worker"]
    removed = int(min(per_worker))
    with manager.api() as api:
        assert api.delete(f"/api/workers/{removed}").status_code == 204
    # (The keeper may take more than one pass to fill the room left: wait for the end state.)
    wait_for(
        lambda: (
            (p := _population(manager, pid))["status"] == "degraded" and p["hosted"] == CAPACITY
        ),
        60,
        what=f"the population degraded with {CAPACITY} of 1000 agents hosted",
    )

    listed = populace("population", "list")
    assert listed.returncode == 0, listed.stderr
    assert "hosted/size" in listed.stdout.splitlines()[0]
    row = _listed(listed.stdout, pid)
    assert row.split() == [str(pid), "degraded", f"{CAPACITY}/1000", "repairable"], row

    # Still no room: the repair says so and exits 1.
    stuck = populace("population", "repair", str(pid))
    assert stuck.returncode == 1, (stuck.stdout, stuck.stderr)
    assert stuck.stdout.startswith(f"population {pid}: degraded, {CAPACITY} of 1000 agents hosted")
    assert "still degraded" in stuck.stderr and "400 of its agents" in stuck.stderr, stuck.stderr

    # A run refuses the degraded population unless partial rounds are allowed.
    whole_run = tmp_path / "whole.yaml"
    whole_run.write_text(LEVEL_K.format(pid=pid, name="whole only", rounds=2))
    _one_line_refusal(
        populace("simulate", str(whole_run)),
        f"population {pid} is degraded: {CAPACITY} of 1000 agents are hosted",
        "allow_partial",
    )
    partial = tmp_path / "partial.yaml"
    partial.write_text(
        LEVEL_K.format(pid=pid, name="partial run", rounds=2) + "allow_partial: true\n"
    )
    run = populace("simulate", str(partial), "--json")
    assert run.returncode == 0, run.stderr
    rounds = [ln for ln in run.stdout.splitlines() if ln.startswith("round ")]
    assert len(rounds) == 2 and all("lost 400" in ln for ln in rounds), run.stdout
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert (summary["status"], summary["lost_agents"]) == ("completed", 800), summary
    assert "800 agent answers counted lost" in run.stderr, run.stderr
    # 400 of 1000 lost a round: 60 % took part, under the default floor of 80 %.
    assert summary["rounds_below_floor"] == 2, summary
    assert "is not whole: 2 rounds below the participation floor (80%)" in run.stderr
    listed = populace("simulation", "list", "--population-id", str(pid))
    assert _listed(listed.stdout, summary["id"]).endswith(
        "partial run  (800 answers lost; 2 rounds below the participation floor (80%))"
    )

    # A worker with room comes: the population is whole again (the keeper may get there first).
    manager.start_workers(procs=1)
    wait_for(lambda: len(manager.workers(state="online")) == 2, 60, what="a new worker online")
    repaired = populace("population", "repair", str(pid))
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout.startswith(f"population {pid}: deployed, 1000 of 1000 agents hosted")
    listed = populace("population", "list")
    assert _listed(listed.stdout, pid).split()[1:3] == ["deployed", "1000/1000"]

    deleted = populace("population", "delete", str(pid))
    assert deleted.returncode == 0, deleted.stderr
    _one_line_refusal(
        populace("population", "repair", str(pid)),
        f"population {pid} is deleted",
        "only a deployed or degraded population can be repaired",
    )


def test_cli_resumes_a_failed_llm_run_after_a_manager_restart_with_no_key_to_give(
    small_cluster, tmp_path
):
    """No API key ever goes through the manager (a config naming one is refused; endpoints
    name the workers' variable with api_key_env), so a restarted manager resumes any run with
    nothing more than `resume`."""
    manager = small_cluster
    populace = Cli(manager)
    with manager.api() as api:
        config = population_yaml("three-educations", name="llm players")
        pid = deploy_population(api, config)["id"]
    dead = "http://127.0.0.1:9"
    keyed = tmp_path / "keyed.yaml"
    keyed.write_text(
        f"population_id: {pid}\nrounds: 2\npolicy:\n  kind: llm\n"
        f'  endpoints: [{{base_url: "{dead}", model: nobody, api_key: sk-test-key==}}]\n'
    )
    refused = populace("simulate", str(keyed))
    assert refused.returncode != 0 and "api_key_env" in refused.stderr, refused.stderr
    assert "sk-test-key" not in refused.stdout + refused.stderr
    assert _simulations(manager, pid) == []

    config = tmp_path / "llm.yaml"
    config.write_text(
        f"population_id: {pid}\nrounds: 2\npolicy:\n  kind: llm\n"
        f'  endpoints: [{{base_url: "{dead}", model: nobody}}]\n'
    )
    failed = populace("simulate", str(config), "--json")
    assert failed.returncode != 0 and "not usable" in failed.stderr, failed.stderr
    sid = json.loads(failed.stdout.strip().splitlines()[-1])["id"]

    def failed_again() -> bool:
        return _simulation(manager, sid)["status"] == "failed"

    manager.stop()
    manager.start()
    wait_for(lambda: len(manager.workers(state="online")) == 2, 60, what="workers back")
    again = populace("simulation", "resume", str(sid))
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"simulation {sid}: running from round 1 of 2\n"
    wait_for(failed_again, 60, what="the run failed again (nobody serves the LLM)")
    assert "not usable" in _simulation(manager, sid)["error"]

    gone = populace("simulation", "resume", str(sid), "--api-key", f"{dead}=sk-test-key==")
    assert gone.returncode != 0 and "--api-key" in gone.stderr, gone.stderr
