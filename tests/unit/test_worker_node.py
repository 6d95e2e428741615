"""The node supervisor: port rule, child environment, failure propagation."""

import sys

import pytest

from worker_server import node
from worker_server.node import child_env, child_port, child_ports, run_node
from worker_server.settings import WorkerSettings


def test_port_zero_lets_every_process_pick_its_own():
    assert child_ports(0, 4) == [0, 0, 0, 0]


def test_fixed_port_gives_process_i_port_p_plus_i():
    assert child_ports(50051, 3) == [50051, 50052, 50053]
    assert child_port(50051, 2) == 50053


def test_port_range_must_fit():
    assert child_ports(65534, 2) == [65534, 65535]
    with pytest.raises(ValueError, match="65536"):
        child_ports(65535, 2)
    with pytest.raises(ValueError):
        child_ports(0, 0)


def test_child_env_carries_the_settings_and_the_childs_port():
    settings = WorkerSettings(
        manager_url="http://mgr:8000",
        join_token="s3cret",
        host="0.0.0.0",
        port=7000,
        procs=2,
        advertise_host="node-a",
        node="rack-1",
        bytes_per_agent_budget=4096,
        log_level="debug",
    )
    env = child_env(settings, port=7001, base_env={"PATH": "/bin", "POPULACE_PORT": "1"})
    assert env["PATH"] == "/bin"
    assert env["POPULACE_JOIN_TOKEN"] == "s3cret"
    assert env["POPULACE_PORT"] == "7001"
    assert env["POPULACE_PROCS"] == "2"
    assert env["POPULACE_MANAGER_URL"] == "http://mgr:8000"
    assert env["POPULACE_ADVERTISE_HOST"] == "node-a"
    assert env["POPULACE_NODE"] == "rack-1"
    assert env["POPULACE_BYTES_PER_AGENT_BUDGET"] == "4096"
    assert env["POPULACE_LOG_LEVEL"] == "DEBUG"


def test_child_env_round_trips_through_worker_settings(monkeypatch):
    settings = WorkerSettings(
        manager_url="http://m:1", join_token="tok", host="::", port=0, procs=3
    )
    for key, value in child_env(settings, port=0, base_env={}).items():
        monkeypatch.setenv(key, value)
    assert WorkerSettings() == settings


def test_the_join_token_never_appears_in_the_child_command():
    command = node.child_command(parent_pid=123, index=4)
    assert command[:3] == [sys.executable, "-m", "worker_server.process"]
    assert command[3:] == ["--parent-pid", "123", "--index", "4"]


def fake_children(monkeypatch, scripts):
    """Replace the worker process by tiny python scripts, one per child index."""
    monkeypatch.setattr(
        node,
        "child_command",
        lambda *, parent_pid, index: [sys.executable, "-c", scripts[index]],
    )


def test_a_failing_child_fails_the_node_and_stops_the_others(monkeypatch, capsys):
    fake_children(
        monkeypatch,
        {
            0: "import time; time.sleep(60)",
            1: "import sys; sys.exit(3)",
        },
    )
    monkeypatch.setattr(node, "CHILD_STOP_TIMEOUT_S", 5.0)
    settings = WorkerSettings(join_token="t", procs=2)
    assert run_node(settings) == 3
    err = capsys.readouterr().err
    assert "process 2/2" in err
    assert "exited with code 3 (had its join token rejected)" in err


def test_clean_children_make_a_clean_node(monkeypatch):
    fake_children(monkeypatch, {0: "pass", 1: "import sys; sys.exit(0)"})
    assert run_node(WorkerSettings(join_token="t", procs=2)) == 0


def test_children_get_their_own_port(monkeypatch, tmp_path):
    script = (
        "import os, pathlib; "
        f"pathlib.Path({str(tmp_path)!r}, os.environ['POPULACE_PORT']).write_text('x')"
    )
    fake_children(monkeypatch, {0: script, 1: script, 2: script})
    assert run_node(WorkerSettings(join_token="t", procs=3, port=40100)) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["40100", "40101", "40102"]


def test_a_child_killed_by_a_signal_is_a_failure(monkeypatch, capsys):
    fake_children(monkeypatch, {0: "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"})
    assert run_node(WorkerSettings(join_token="t", procs=1)) == 128 + 9
    assert "killed by SIGKILL" in capsys.readouterr().err


def test_an_impossible_port_range_is_a_config_error(capsys):
    assert run_node(WorkerSettings(join_token="t", procs=3, port=65534)) == 2
    assert "65536" in capsys.readouterr().err
