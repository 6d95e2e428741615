"""Each lifecycle's table (backend/lifecycles/, worker_server/worker_states.py) is whole and
consistent, and random walks over it keep to it: an allowed step moves, a refused one raises
naming both states and moves nothing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.errors import Conflict
from backend.lifecycles import (
    IllegalTransition,
    TransitionRefused,
    decision,
    deploy,
    interview,
    population,
    simulation,
    sweep,
)
from worker_server import worker_states

MACHINES = [
    simulation.MACHINE,
    population.MACHINE,
    deploy.MACHINE,
    sweep.MACHINE,
    decision.MACHINE,
    interview.MACHINE,
    worker_states.MACHINE,
]
BY_NAME = {m.name: m for m in MACHINES}


def reachable(machine, start: str) -> set[str]:
    """Every state a walk from start can be in (start included)."""
    seen, todo = {start}, [start]
    while todo:
        for nxt in machine.transitions[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_the_table_is_whole_and_its_sets_are_states(machine):
    assert set(machine.transitions) == set(machine.states)
    assert set(machine.final) <= set(machine.states)
    assert machine.initial and set(machine.initial) <= set(machine.states)
    # Every state is reached from a new row.
    assert set().union(*(reachable(machine, s) for s in machine.initial)) == set(machine.states)
    for target in machine.states:
        assert set(machine.sources(target)) == {
            s for s in machine.states if target in machine.transitions[s]
        }


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
@given(data=st.data())
def test_random_walks_keep_to_the_table(machine, data):
    state = data.draw(st.sampled_from(machine.initial))
    path = [state]
    for target in data.draw(st.lists(st.sampled_from(machine.states), max_size=30)):
        if machine.allows(state, target):
            machine.check(state, target)
            assert state in machine.sources(target)
            state = target
            path.append(state)
        else:
            with pytest.raises(IllegalTransition) as refused:
                machine.check(state, target)
            assert (refused.value.current, refused.value.target) == (state, target)
            assert f"from {state} to {target}" in str(refused.value)
            assert state not in machine.sources(target)
    # A state without a way out ends every walk that reaches it.
    for i, s in enumerate(path):
        if not machine.transitions[s]:
            assert i == len(path) - 1


def test_the_managers_refusals_are_conflicts():
    with pytest.raises(TransitionRefused) as refused:
        simulation.check_transition(simulation.COMPLETED, simulation.RUNNING)
    assert isinstance(refused.value, Conflict) and refused.value.http_status == 409
    assert refused.value.detail == "a simulation cannot go from completed to running"


def test_a_simulation_run():
    m = simulation.MACHINE
    # Nothing goes back to pending; completed and cancelled are never left; a failed run (and a
    # paused one) only resumes.
    assert m.sources(simulation.PENDING) == ()
    assert m.transitions[simulation.COMPLETED] == m.transitions[simulation.CANCELLED] == ()
    assert m.transitions[simulation.FAILED] == (simulation.RUNNING,)
    assert set(simulation.RESUMABLE) <= set(m.sources(simulation.RUNNING))
    # What the store's conditional UPDATEs read: any active run may be written into a new status.
    for target in simulation.SIMULATION_STATUSES:
        if target != simulation.PENDING:
            assert m.sources(target, among=simulation.ACTIVE) == simulation.ACTIVE
    assert {s: reachable(m, s) for s in simulation.SIMULATION_STATUSES} == {
        "pending": {"pending", "running", "paused", "completed", "failed", "cancelled"},
        "running": {"running", "paused", "completed", "failed", "cancelled"},
        "paused": {"running", "paused", "completed", "failed", "cancelled"},
        "failed": {"running", "paused", "completed", "failed", "cancelled"},
        "completed": {"completed"},
        "cancelled": {"cancelled"},
    }
    assert set(simulation.STATUS_OF_KIND.values()) <= set(simulation.SIMULATION_STATUSES)
    assert set(simulation.STATUS_OF_KIND) <= set(simulation.TIMELINE_KINDS)


def test_a_population():
    m = population.MACHINE
    assert m.sources(population.DEPLOYING) == ()
    # A repair moves a playable population between deployed and degraded only.
    for target in population.PLAYABLE:
        assert set(population.PLAYABLE) <= set(m.sources(target))
    # Deleted for good; a deploy that failed is only deleted.
    assert reachable(m, population.DELETED) == {population.DELETED}
    assert reachable(m, population.FAILED) == {
        population.FAILED,
        population.DELETING,
        population.DELETED,
    }


def test_a_deploys_stages_in_order():
    m = deploy.MACHINE
    assert m.allows(deploy.SAMPLED, deploy.PERSONAS)  # no graph
    assert m.allows(deploy.PERSONAS, deploy.PERSONAS)  # progress within a stage
    assert not m.allows(deploy.CREATED, deploy.PERSONAS)
    assert all(m.allows(s, deploy.FAILED) for s in deploy.STAGES if not m.is_final(s))
    assert set(deploy.DEPLOY_STAGE_SPANS) == set(deploy.DEPLOY_STAGES)
    assert deploy.deploy_percent(deploy.PERSISTED, 5, 10) == 42


def test_sweeps_decisions_interviews_and_workers():
    assert sweep.MACHINE.sources(sweep.COMPLETED) == (sweep.RUNNING,)
    assert all(not decision.MACHINE.transitions[s] for s in decision.DECISION_STATUSES)
    assert (decision.VALID, decision.INVALID, decision.LATE, decision.LOST) == (
        decision.DECISION_STATUSES
    )
    assert interview.MACHINE.sources(interview.ANSWERED) == (interview.ANSWERING,)
    workers = worker_states.MACHINE
    assert workers.transitions[worker_states.REMOVED] == ()
    assert workers.sources(worker_states.REMOVED) == (
        worker_states.ONLINE,
        worker_states.OFFLINE,
        worker_states.DRAINING,
    )
    assert set(worker_states.LIVE_STATES) <= set(workers.states)
