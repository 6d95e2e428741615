"""What the global environment tells after each round: persistence, live events, and the guard
that the population is still there."""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.events.catalog import LlmMeter, RoundCompleted, RoundProgress
from backend.events.hub import EventHub
from backend.lifecycles import population as population_lifecycle
from backend.populations import store as population_store
from backend.rounds.meters import round_meters
from backend.simulations import store, validity
from backend.simulations.environment import GlobalEnvironment, SimulationFailed
from backend.simulations.outcome import DecisionTable, RoundOutcome

# round.progress events per simulation at most this often (10 per second).
PROGRESS_INTERVAL_S = 0.1


def _live(meter: dict) -> dict:
    """A meter for a progress event: the figures without the raw buckets."""
    return {k: v for k, v in meter.items() if k not in ("latency_counts", "latency_sum_s")}


class _Listener:
    async def round_started(self, env: GlobalEnvironment, round_number: int) -> None:
        pass

    def decisions_arrived(self, env: GlobalEnvironment, round_number: int, answered: int) -> None:
        pass

    async def round_completed(
        self, env: GlobalEnvironment, result: RoundOutcome, decisions: DecisionTable
    ) -> None:
        pass


class PersistRounds(_Listener):
    """The round's statistics and every decision, in one transaction."""

    def __init__(self, sessionmaker: async_sessionmaker) -> None:
        self.sessionmaker = sessionmaker

    async def round_completed(self, env, result, decisions) -> None:
        async with self.sessionmaker() as session:
            await store.save_round(session, env.spec.simulation_id, result, decisions)


class PublishRoundEvents(_Listener):
    """`round.progress` (answered/total, throttled) and `round.completed` (the statistics)."""

    def __init__(self, hub: EventHub, total_agents: int) -> None:
        self.hub = hub
        self.total = total_agents
        self._last = 0.0
        self._started = time.monotonic()

    def _progress(self, env: GlobalEnvironment, round_number: int, answered: int) -> None:
        now = time.monotonic()
        self._last = now
        event = RoundProgress(
            simulation_id=env.spec.simulation_id,
            round=round_number,
            rounds=env.spec.rounds,
            answered=answered,
            total=self.total,
        )
        if env.live_endpoints:
            usages = (u for batch in env.live_endpoints.values() for u in batch)
            event.endpoints = [
                LlmMeter(**_live(m))
                for m in round_meters(usages, now - self._started, env.spec.prices)
            ]
        self.hub.publish(event)

    async def round_started(self, env, round_number) -> None:
        self._started = time.monotonic()
        self._progress(env, round_number, 0)

    def decisions_arrived(self, env, round_number, answered) -> None:
        if time.monotonic() - self._last >= PROGRESS_INTERVAL_S:
            self._progress(env, round_number, answered)

    async def round_completed(self, env, result, decisions) -> None:
        self.hub.publish(
            RoundCompleted(
                simulation_id=env.spec.simulation_id,
                rounds=env.spec.rounds,
                **result.stats(),
                **validity.round_rates(
                    result.n_valid, result.n_invalid, result.n_late, result.n_lost
                ),
            )
        )


class PopulationStillDeployed(_Listener):
    """A population deleted during a run fails the run before its next round (the rounds
    already played stay, like the population's row). A degraded one plays on: the round
    waits for its agents to be hosted again."""

    def __init__(self, sessionmaker: async_sessionmaker, population_id: int) -> None:
        self.sessionmaker = sessionmaker
        self.population_id = population_id

    async def round_started(self, env, round_number) -> None:
        async with self.sessionmaker() as session:
            population = await population_store.get_population(session, self.population_id)
        if not population_lifecycle.is_playable(population.status):
            raise SimulationFailed(
                f"population {self.population_id} is {population.status}: it cannot play "
                f"round {round_number}"
            )
