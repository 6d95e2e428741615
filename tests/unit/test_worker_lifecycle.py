"""The registration lifecycle as a pure state machine: no sockets, no clock."""

import pytest

from worker_server.exit_codes import ExitCode
from worker_server.lifecycle import (
    BACKOFF_CAP_S,
    Heartbeat,
    Phase,
    Register,
    RegistrationLifecycle,
    Shutdown,
    StopReason,
    backoff_delay,
)


def registered(worker_id: int = 7, interval: float = 1.0) -> RegistrationLifecycle:
    lc = RegistrationLifecycle()
    lc.registered(worker_id, interval, 3.0)
    return lc


def test_starts_unregistered_and_registers_at_once():
    lc = RegistrationLifecycle()
    assert lc.phase is Phase.UNREGISTERED
    assert lc.next_action() == Register(delay_s=0.0)


def test_registration_starts_heartbeats_at_the_manager_interval():
    lc = registered(worker_id=7, interval=0.25)
    assert lc.phase is Phase.REGISTERED
    assert lc.worker_id == 7
    assert lc.next_action() == Heartbeat(worker_id=7, delay_s=0.25)


def test_unknown_worker_registers_again_and_takes_the_new_id():
    lc = registered(worker_id=7)
    lc.unknown_worker()
    assert lc.phase is Phase.UNREGISTERED
    assert lc.worker_id is None
    assert lc.next_action() == Register(delay_s=0.0)
    lc.registered(9, 1.0, 3.0)
    assert lc.next_action() == Heartbeat(worker_id=9, delay_s=1.0)
    assert lc.registrations == 2


def test_removed_shuts_down_cleanly_without_deregistering():
    lc = registered()
    lc.removed()
    assert lc.next_action() == Shutdown(StopReason.REMOVED, ExitCode.OK, deregister_id=None)


def test_join_token_rejected_exits_3():
    lc = RegistrationLifecycle()
    lc.join_token_rejected()
    action = lc.next_action()
    assert isinstance(action, Shutdown)
    assert action.exit_code == 3
    assert action.deregister_id is None


def test_other_4xx_exits_with_config_code():
    lc = RegistrationLifecycle()
    lc.rejected()
    assert lc.next_action() == Shutdown(StopReason.REJECTED, ExitCode.CONFIG, None)


@pytest.mark.parametrize("reason", [StopReason.SIGNAL, StopReason.PARENT_DIED])
def test_voluntary_stop_deregisters_the_current_id(reason):
    lc = registered(worker_id=7)
    lc.stop(reason)
    assert lc.next_action() == Shutdown(reason, ExitCode.OK, deregister_id=7)


def test_stop_before_registration_has_nothing_to_deregister():
    lc = RegistrationLifecycle()
    lc.stop(StopReason.SIGNAL)
    assert lc.next_action() == Shutdown(StopReason.SIGNAL, ExitCode.OK, deregister_id=None)


def test_a_registration_that_races_a_stop_is_still_deregistered():
    lc = RegistrationLifecycle()
    lc.stop(StopReason.SIGNAL)
    lc.registered(11, 1.0, 3.0)
    assert lc.phase is Phase.STOPPING
    assert lc.next_action() == Shutdown(StopReason.SIGNAL, ExitCode.OK, deregister_id=11)


def test_first_stop_reason_wins():
    lc = registered()
    lc.stop(StopReason.SIGNAL)
    lc.join_token_rejected()
    lc.unknown_worker()
    action = lc.next_action()
    assert isinstance(action, Shutdown)
    assert action.reason is StopReason.SIGNAL
    assert action.exit_code == ExitCode.OK


def test_manager_unavailable_backs_off_exponentially_then_resets():
    lc = RegistrationLifecycle()
    delays = []
    for _ in range(8):
        lc.manager_unavailable()
        delays.append(lc.next_action().delay_s)
    assert delays[:3] == [0.5, 1.0, 2.0]
    assert max(delays) == BACKOFF_CAP_S
    assert delays == sorted(delays)
    lc.registered(3, 1.0, 3.0)
    assert lc.failures == 0
    assert lc.next_action() == Heartbeat(worker_id=3, delay_s=1.0)


def test_heartbeat_failures_keep_the_id_and_retry_with_backoff():
    lc = registered(worker_id=5, interval=1.0)
    lc.manager_unavailable()
    lc.manager_unavailable()
    assert lc.next_action() == Heartbeat(worker_id=5, delay_s=1.0)  # 2nd failure -> 1.0 s
    lc.manager_unavailable()
    assert lc.next_action() == Heartbeat(worker_id=5, delay_s=2.0)
    lc.heartbeat_ok("draining")
    assert lc.manager_state == "draining"
    assert lc.next_action() == Heartbeat(worker_id=5, delay_s=1.0)


def test_a_heartbeat_answer_sets_the_cadence_the_manager_asks_for():
    lc = registered(worker_id=5, interval=1.0)
    lc.heartbeat_ok("online", 6.0, 18.0)  # the fleet grew
    assert lc.next_action() == Heartbeat(worker_id=5, delay_s=6.0)
    assert lc.ttl_s == 18.0
    lc.heartbeat_ok("online")  # a manager that does not say keeps the cadence
    assert lc.next_action() == Heartbeat(worker_id=5, delay_s=6.0)


def test_backoff_is_capped():
    assert backoff_delay(0) == 0.0
    assert backoff_delay(1, base_s=0.5, cap_s=4.0) == 0.5
    assert backoff_delay(4, base_s=0.5, cap_s=4.0) == 4.0
    assert backoff_delay(10_000, base_s=0.5, cap_s=4.0) == 4.0


def test_rejects_a_non_positive_heartbeat_interval():
    lc = RegistrationLifecycle()
    with pytest.raises(ValueError):
        lc.registered(1, 0.0, 3.0)
    assert lc.phase is Phase.UNREGISTERED
