"""The node supervisor's restart policy (NodeSlots) as a pure state machine: no processes, no clock."""

import signal

import pytest

from worker_server.exit_codes import ExitCode
from worker_server.node import (
    Ended,
    ExitKind,
    NodeFailed,
    NodeSlots,
    RestartLater,
    RestartPolicy,
    SlotPhase,
    classify_exit,
)

SIGKILLED = -signal.SIGKILL
POLICY = RestartPolicy(base_s=0.5, cap_s=30.0, stable_s=60.0)


def slots(procs: int = 2) -> NodeSlots:
    return NodeSlots(procs, now=0.0, policy=POLICY)


def crash_and_restart(node: NodeSlots, index: int, *, at: float) -> RestartLater:
    """A crash at `at`, then the restart as soon as it is due."""
    outcome = node.exited(index, SIGKILLED, now=at)
    assert isinstance(outcome, RestartLater)
    due_at = at + outcome.delay_s
    assert node.due(due_at) == [index]
    node.started(index, now=due_at)
    return outcome


@pytest.mark.parametrize(
    ("returncode", "kind"),
    [
        (0, ExitKind.STOPPED),
        (-signal.SIGTERM, ExitKind.STOPPED),  # got our SIGTERM before installing its handler
        (-signal.SIGINT, ExitKind.STOPPED),
        (ExitCode.CONFIG, ExitKind.FATAL),
        (ExitCode.JOIN_TOKEN_REJECTED, ExitKind.FATAL),
        (ExitCode.BIND_FAILED, ExitKind.FATAL),
        (ExitCode.ERROR, ExitKind.CRASHED),
        (SIGKILLED, ExitKind.CRASHED),
        (-signal.SIGSEGV, ExitKind.CRASHED),
        (120, ExitKind.CRASHED),
    ],
)
def test_which_exits_are_restarted(returncode, kind):
    assert classify_exit(returncode) is kind


def test_a_crashed_child_is_restarted_in_its_slot_after_the_first_backoff_step():
    node = slots()
    outcome = node.exited(1, SIGKILLED, now=5.0)
    assert outcome == RestartLater(index=1, returncode=SIGKILLED, delay_s=0.5, restart=1)
    assert node.slots[1].phase is SlotPhase.WAITING
    assert node.due(5.4) == []
    assert node.due(5.5) == [1]
    node.started(1, now=5.5)
    assert node.slots[1].phase is SlotPhase.RUNNING
    assert node.slots[1].restarts == 1
    assert node.due(100.0) == []
    # Its sibling was never touched, and the node goes on.
    assert node.slots[0].phase is SlotPhase.RUNNING
    assert not node.stopping and not node.finished and node.failure is None


def test_quick_crashes_back_off_exponentially_up_to_the_cap():
    node = slots(1)
    now, delays = 0.0, []
    for _ in range(9):
        outcome = crash_and_restart(node, 0, at=now + 1.0)  # up for a second each time
        delays.append(outcome.delay_s)
        now = node.slots[0].started_at
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert node.slots[0].restarts == 9


def test_the_backoff_resets_once_a_child_stayed_up_long_enough():
    node = slots(1)
    for at in (1.0, 3.0, 6.0):
        crash_and_restart(node, 0, at=at)
    started = node.slots[0].started_at
    # Up for just under the stable time: still backing off.
    assert node.exited(0, ExitCode.ERROR, now=started + 59.9).delay_s == 4.0
    node.started(0, now=started + 63.9)
    # Up for the stable time: a new crash is a first crash again.
    outcome = node.exited(0, ExitCode.ERROR, now=started + 63.9 + 60.0)
    assert outcome.delay_s == 0.5
    assert outcome.restart == 5


def test_slots_back_off_independently():
    node = slots(2)
    crash_and_restart(node, 0, at=1.0)
    crash_and_restart(node, 0, at=2.0)
    assert node.exited(1, SIGKILLED, now=3.0).delay_s == 0.5
    assert node.exited(0, SIGKILLED, now=3.0).delay_s == 2.0
    assert node.due(3.5) == [1]
    assert node.due(5.0) == [0, 1]


@pytest.mark.parametrize(
    "code", [ExitCode.CONFIG, ExitCode.JOIN_TOKEN_REJECTED, ExitCode.BIND_FAILED]
)
def test_an_exit_no_restart_can_fix_stops_the_node_with_its_code(code):
    node = slots(3)
    crash_and_restart(node, 2, at=1.0)
    node.exited(2, SIGKILLED, now=2.0)  # waiting for its second restart
    outcome = node.exited(1, code, now=2.1)
    assert outcome == NodeFailed(index=1, returncode=code, exit_code=code, while_stopping=False)
    assert node.stopping and node.exit_code == code
    # The waiting slot is never restarted; the running one ends when its child is stopped.
    assert node.slots[2].phase is SlotPhase.ENDED
    assert node.due(1000.0) == []
    assert not node.finished
    assert node.exited(0, -signal.SIGTERM, now=2.2) == Ended(0, -signal.SIGTERM)
    assert node.finished and node.exit_code == code


def test_a_clean_exit_ends_its_slot_and_the_node_ends_with_the_last_slot():
    node = slots(2)
    assert node.exited(0, 0, now=1.0) == Ended(0, 0)  # removed by an operator: 410, exit 0
    assert node.slots[0].phase is SlotPhase.ENDED
    assert not node.finished and node.due(100.0) == []
    node.exited(1, SIGKILLED, now=2.0)
    assert not node.finished  # a slot waiting for its restart keeps the node up
    node.started(1, now=2.5)
    node.exited(1, 0, now=3.0)
    assert node.finished and node.exit_code == ExitCode.OK


def test_a_stop_cancels_pending_restarts_and_restarts_nothing_after():
    node = slots(3)
    node.exited(0, SIGKILLED, now=1.0)
    node.stop()
    assert node.slots[0].phase is SlotPhase.ENDED
    assert node.due(1000.0) == []
    with pytest.raises(ValueError):
        node.started(0, now=2.0)
    # Children stopping on our SIGTERM, even dying of it, end cleanly.
    assert node.exited(1, 0, now=2.0) == Ended(1, 0)
    assert node.exited(2, -signal.SIGTERM, now=2.0) == Ended(2, -signal.SIGTERM)
    assert node.finished and node.exit_code == ExitCode.OK


def test_a_crash_while_stopping_is_not_restarted_and_sets_the_exit_code_once():
    node = slots(3)
    node.stop()
    first = node.exited(0, SIGKILLED, now=1.0)  # e.g. killed for ignoring SIGTERM
    assert first == NodeFailed(0, SIGKILLED, exit_code=128 + 9, while_stopping=True)
    second = node.exited(1, ExitCode.ERROR, now=1.0)
    assert isinstance(second, NodeFailed) and second.exit_code == 128 + 9
    node.exited(2, 0, now=1.0)
    assert node.finished and node.exit_code == 128 + 9


def test_a_restart_that_cannot_start_is_tried_again_later():
    node = slots(1)
    node.exited(0, SIGKILLED, now=1.0)
    retry = node.start_failed(0, now=1.5)
    assert retry == RestartLater(index=0, returncode=ExitCode.ERROR, delay_s=1.0, restart=1)
    assert node.due(2.4) == [] and node.due(2.5) == [0]
    node.started(0, now=2.5)
    assert node.slots[0].restarts == 1


def test_a_node_that_cannot_start_fails_with_the_code_given():
    node = slots(2)
    node.fail(ExitCode.ERROR)
    node.fail(ExitCode.CONFIG)  # the first failure wins
    assert node.stopping and node.exit_code == ExitCode.ERROR


def test_exits_are_only_accepted_from_running_slots():
    node = slots(1)
    node.exited(0, SIGKILLED, now=1.0)
    with pytest.raises(ValueError):
        node.exited(0, SIGKILLED, now=1.1)
    with pytest.raises(ValueError):
        NodeSlots(0, now=0.0)
