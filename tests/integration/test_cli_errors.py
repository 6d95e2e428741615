"""The CLI against a real manager (and one real worker): an unreachable manager is one line, a
refused token prints no table, a bad config names its lines, commands end with a summary
(`--json` for the raw object), and the deploy and round bars end full."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from backend.cli_errors import locate, validation_lines
from backend.events.catalog import deploy_percent
from tests.support import free_port, populace_cmd, wait_for
from tests.support_populations import population_text

POPULATION = population_text("cli-summary")


def _run(*args: str, manager_url: str, token: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "POPULACE_MANAGER_URL": manager_url, "POPULACE_API_TOKEN": token}
    return subprocess.run(populace_cmd(*args), env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from tests.support import Manager, stop_process

    tmp = tmp_path_factory.mktemp("cli-errors")
    manager = Manager(tmp=tmp, database_url=f"sqlite+aiosqlite:///{tmp}/populace.db").start()
    workers = manager.start_workers(procs=1)
    try:
        wait_for(lambda: len(manager.workers(state="online")) == 1, 60, what="a worker online")
        yield manager
    finally:
        stop_process(workers)
        manager.stop()


@pytest.mark.parametrize(
    "command",
    [("population", "list"), ("simulation", "list"), ("simulation", "cancel", "1")],
)
def test_an_unreachable_manager_is_one_line_and_a_non_zero_exit(command):
    url = f"http://127.0.0.1:{free_port()}"
    run = _run(*command, manager_url=url, token="t" * 32)
    assert run.returncode != 0
    assert run.stderr.strip() == f"populace: cannot reach the manager at {url}: connection refused"
    assert run.stdout == ""  # no table header before the failure either


def test_a_refused_token_prints_the_error_and_no_table_header(cluster):
    for command in (("population", "list"), ("simulation", "list")):
        run = _run(*command, manager_url=cluster.url, token="not-the-token-" * 3)
        assert run.returncode != 0
        assert run.stdout == "", run.stdout
        assert "401" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_a_bad_config_names_the_file_line_of_each_field(cluster, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(POPULATION.replace("size: 300", "size: -1").replace("seed: 1", "seed: many"))
    run = _run("population", "create", str(bad), manager_url=cluster.url, token=cluster.api_token)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert "422" in lines[0] and "Traceback" not in run.stderr, run.stderr
    assert any(ln.startswith(f"{bad}:2: size: ") for ln in lines), run.stderr
    assert any(ln.startswith(f"{bad}:3: seed: ") for ln in lines), run.stderr

    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nsize: 10\ndistributions: [\n  - oops: {\n")
    run = _run(
        "population", "create", str(broken), manager_url=cluster.url, token=cluster.api_token
    )
    assert run.returncode != 0
    located = [ln for ln in run.stderr.splitlines() if ln.startswith(f"{broken}:")]
    assert located and located[0].split(":")[1].isdigit(), run.stderr


def test_create_and_simulate_end_with_a_summary_or_json(cluster, tmp_path):
    config = tmp_path / "population.yaml"
    config.write_text(POPULATION)
    created = _run(
        "population", "create", str(config), manager_url=cluster.url, token=cluster.api_token
    )
    assert created.returncode == 0, created.stderr
    last = created.stdout.strip().splitlines()[-1]
    assert (
        last.startswith("population ")
        and "(cli-summary): deployed, 300 of 300 agents hosted" in last
    )
    assert "education: " in last and not last.startswith("{"), last
    pid = int(last.split()[1])

    run_config = tmp_path / "run.yaml"
    run_config.write_text(
        f"population_id: {pid}\nname: summary run\nrounds: 2\n"
        "policy: {kind: synthetic}\nseed: 1\n"
    )
    human = _run("simulate", str(run_config), manager_url=cluster.url, token=cluster.api_token)
    assert human.returncode == 0, human.stderr
    summary = human.stdout.strip().splitlines()[-1]
    assert (
        summary.startswith("simulation ")
        and "(summary run): completed, 2 of 2 rounds played" in summary
    )
    raw = _run(
        "simulate", str(run_config), "--json", manager_url=cluster.url, token=cluster.api_token
    )
    assert raw.returncode == 0, raw.stderr
    assert json.loads(raw.stdout.strip().splitlines()[-1])["status"] == "completed"


def test_the_deploy_bar_follows_the_dashboard_stages():
    # The same spans as frontend/src/state/populations.ts: personas done is 25 %, not 0 or 50.
    assert deploy_percent("sampled", 300, 300) == 5
    assert deploy_percent("personas", 300, 300) == 25
    assert deploy_percent("persisted", 150, 300) == 42
    assert deploy_percent("created", 300, 300) == 100
    assert deploy_percent("deleting", None, None) is None


def test_fields_are_located_in_yaml_and_json():
    text = "name: x\ndistributions:\n  - name: edu\n    categories: {a: 1}\nsize: 3\n"
    assert locate(text, ["size"]) == 5
    assert locate(text, ["distributions", 0, "categories"]) == 4
    assert locate(text, ["distributions", 0, "missing"]) == 3  # its parent
    assert locate('{\n  "rounds": 5000\n}', ["rounds"]) == 2
    issues = [{"loc": ["body", "(document)"], "msg": "line 7, column 2: bad indent", "type": "x"}]
    assert validation_lines("f.yaml", text, issues) == ["f.yaml:7: bad indent"]


def test_a_round_bar_ends_full_when_the_round_completes(capsys):
    from backend.cli_simulate import _RoundBars

    bars = _RoundBars(rounds=2)
    bars.progress(1, 0, 200)  # the round started; progress events are throttled...
    bars.progress(1, 100, 200)
    assert bars.shown == 100
    bar = bars.bar
    bars.complete(1)  # ...so its completion fills what they did not report
    assert bars.shown == 200 and bar.pos == bar.length == 200
    assert bars.bar is None
