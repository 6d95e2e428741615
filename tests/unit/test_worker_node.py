"""The node supervisor with real (tiny) child processes: port rule, child environment, restarts
of crashed children, and failures that stop the node. The restart policy itself is tested
without processes in test_node_restarts.py."""

import sys
from textwrap import dedent

import pytest

from worker_server import node
from worker_server.node import RestartPolicy, child_env, child_port, child_ports, run_node
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


FAST_RESTARTS = RestartPolicy(base_s=0.01, cap_s=0.01)

# For child scripts that wait for something another process does: poll, and end with a message
# (exit code 9) if it never happens rather than hang the test.
WAIT = dedent(
    """
    import sys, time
    def wait(condition, what, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                print(f"timed out waiting for {what}", file=sys.stderr)
                sys.exit(9)
            time.sleep(0.01)
    """
)


def fake_children(monkeypatch, scripts, *, pass_index=False):
    """Replace the worker process by tiny python scripts, one per child index."""

    def command(*, parent_pid, index):
        return [sys.executable, "-c", scripts[index], *([str(index)] if pass_index else [])]

    monkeypatch.setattr(node, "child_command", command)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (2, "had bad settings or a refused request"),
        (3, "had its join token rejected"),
        (4, "could not bind its gRPC port"),
    ],
)
def test_an_exit_no_restart_can_fix_fails_the_node_and_stops_the_others(
    monkeypatch, capsys, code, reason
):
    fake_children(
        monkeypatch,
        {
            0: "import time; time.sleep(60)",  # runs until the node stops it
            1: f"import sys; sys.exit({code})",
        },
    )
    monkeypatch.setattr(node, "CHILD_STOP_TIMEOUT_S", 5.0)
    settings = WorkerSettings(join_token="t", procs=2)
    assert run_node(settings, policy=FAST_RESTARTS) == code
    err = capsys.readouterr().err
    assert "process 2/2" in err
    assert f"exited with code {code} ({reason}); restarting cannot fix that" in err
    assert "restarting it" not in err


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


def test_a_crashed_child_is_restarted_in_its_slot_on_its_port_and_its_sibling_keeps_running(
    monkeypatch, capsys, tmp_path
):
    # Each run of a child appends its pid and port to runs-<index>.
    record = dedent(
        f"""
        import os, pathlib, sys, time
        runs = pathlib.Path({str(tmp_path)!r}, "runs-" + sys.argv[1])
        with runs.open("a") as f:
            f.write(f"{{os.getpid()}} {{os.environ['POPULACE_PORT']}}\\n")
        n = len(runs.read_text().splitlines())
        """
    )
    # Child 1 is SIGKILLed on its first run, crashes on its second and ends cleanly on its third;
    # child 0 runs until child 1's third run.
    sibling = (
        record
        + WAIT
        + dedent(
            """
            other = runs.with_name("runs-1")
            wait(lambda: other.exists() and len(other.read_text().splitlines()) >= 3, "run 3")
            """
        )
    )
    crasher = record + dedent(
        """
        if n == 1:
            os.kill(os.getpid(), 9)
        sys.exit(1 if n == 2 else 0)
        """
    )
    fake_children(monkeypatch, {0: sibling, 1: crasher}, pass_index=True)
    settings = WorkerSettings(join_token="t", procs=2, port=40200)
    assert run_node(settings, policy=FAST_RESTARTS) == 0

    def runs(index):
        return [line.split() for line in (tmp_path / f"runs-{index}").read_text().splitlines()]

    assert [port for _, port in runs(0)] == ["40200"]  # started once, never disturbed
    restarted = runs(1)
    assert [port for _, port in restarted] == ["40201"] * 3
    assert len({pid for pid, _ in restarted}) == 3
    err = capsys.readouterr().err
    assert "process 2/2 (pid " in err
    assert "was killed by SIGKILL; restarting it in 0.0s (restart 1 of this process)" in err
    assert "exited with code 1 (crashed); restarting it in 0.0s (restart 2 of this process)" in err
    assert err.count("restarted process 2/2") == 2 and "on port 40201" in err


def test_a_stop_during_a_restart_backoff_restarts_nothing(monkeypatch, capsys, tmp_path):
    pid_file = tmp_path / "crasher.pid"
    # Child 1 crashes once (a second run would fail loudly).
    crasher = dedent(
        f"""
        import os, pathlib, sys
        pid_file = pathlib.Path({str(pid_file)!r})
        assert not pid_file.exists(), "started twice"
        pid_file.write_text(f"{{os.getpid()}}.")
        sys.exit(1)
        """
    )
    # Child 0 waits until the supervisor has reaped child 1 (its /proc entry is gone), then
    # sends SIGTERM to the supervisor during the backoff, as an operator would.
    stopper = WAIT + dedent(
        f"""
        import os, pathlib, signal
        pid_file = pathlib.Path({str(pid_file)!r})
        wait(lambda: pid_file.exists() and pid_file.read_text().endswith("."), "the crash")
        wait(lambda: not pathlib.Path("/proc", pid_file.read_text()[:-1]).exists(), "the reap")
        os.kill(os.getppid(), signal.SIGTERM)
        time.sleep(60)  # runs until the supervisor stops it
        """
    )
    fake_children(monkeypatch, {0: stopper, 1: crasher})
    slow = RestartPolicy(base_s=3600.0, cap_s=3600.0)
    assert run_node(WorkerSettings(join_token="t", procs=2), policy=slow) == 0
    err = capsys.readouterr().err
    assert "exited with code 1 (crashed); restarting it in 3600.0s" in err
    assert "restarted process" not in err


def test_an_impossible_port_range_is_a_config_error(capsys):
    assert run_node(WorkerSettings(join_token="t", procs=3, port=65534)) == 2
    assert "65536" in capsys.readouterr().err
