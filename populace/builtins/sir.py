"""An epidemic on the population's graph (susceptible, infectious, recovered), as the built-in
network plugin `sir`.

Each agent's public value is its state: 0 susceptible, 1 infectious, 2 recovered. In round 1
exactly `initial_infected` agents (a seeded draw over the whole population, the same whatever
the placement) are infectious and the rest susceptible. From round 2 on, all at once:

- a susceptible agent with k infectious neighbours (after the last round) becomes infectious with
  probability 1 - (1 - transmission)^k: each infectious neighbour transmits independently;
- an infectious agent that has been infectious for `infectious_rounds` rounds recovers;
- a recovered agent stays recovered (immune for good).

So an infected agent is infectious for exactly `infectious_rounds` rounds and each of its edges
to a susceptible agent transmits with probability 1 - (1 - transmission)^infectious_rounds over
them: the final size is that of bond percolation (on an Erdős–Rényi graph of mean degree c with
one infectious round, the attack rate solves a = 1 - exp(-c * transmission * a)). The run stops
when no agent is infectious. Written with populace.plugin only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import Field

from populace.plugin import (
    INVALID,
    ChoiceAction,
    Metric,
    MetricValue,
    Observation,
    Params,
    PolicySupport,
    Resolution,
    RoundActions,
    RulePolicy,
    Simulation,
)

STATES = ("S", "I", "R")
SUSCEPTIBLE, INFECTIOUS, RECOVERED = 0.0, 1.0, 2.0  # the option's index is the value
# The policy's streams (Observation.uniforms and .chosen), numbered by the plugin.
SEED_STREAM = 0
INFECTION_STREAM = 0


class SirParams(Params):
    transmission: float = Field(
        0.1,
        ge=0,
        le=1,
        allow_inf_nan=False,
        title="Transmission",
        description="chance that an infectious agent infects a susceptible neighbour, per edge "
        "and infectious round",
    )
    initial_infected: int = Field(
        10,
        ge=1,
        le=10_000_000,
        title="Initially infectious",
        description="agents infectious in round 1 (a seeded draw); at most the population",
    )
    infectious_rounds: int = Field(
        1,
        ge=1,
        le=10_000,
        title="Infectious rounds",
        description="rounds an agent stays infectious before it recovers",
    )


class Contagion(RulePolicy):
    """Independent transmission along every edge from infectious to susceptible agents, a fixed
    infectious period, then immunity (the discrete-time SIR model on a network)."""

    def decide(self, params: SirParams, policy: Params, observation: Observation):
        if observation.round == 1:
            if params.initial_infected > observation.population_size:
                raise ValueError(
                    f"initial_infected ({params.initial_infected}) is more than the population "
                    f"({observation.population_size} agents)"
                )
            seeded = observation.chosen(params.initial_infected, SEED_STREAM)
            return np.where(seeded, INFECTIOUS, SUSCEPTIBLE)
        neighbours = observation.require_neighbours()
        state = observation.previous
        # Counted around the infectious agents only: each round touches their edges, not all.
        exposure = neighbours.count_of(INFECTIOUS)
        # 0^0 = 1: no infectious neighbour, no chance; transmission 1, any one infects.
        chance = 1.0 - np.power(1.0 - params.transmission, exposure)
        infected = observation.uniforms(INFECTION_STREAM) < chance
        recovers = observation.streak >= params.infectious_rounds
        return np.select(
            [state == INFECTIOUS, state == RECOVERED],
            [np.where(recovers, RECOVERED, INFECTIOUS), RECOVERED],
            # Susceptible, or no state after round 1 (its action was lost): it can be infected.
            np.where(infected, INFECTIOUS, SUSCEPTIBLE),
        )


class Sir(Simulation):
    title = "SIR epidemic"
    description = (
        "An infection spreads along the population's graph: susceptible agents catch it from "
        "infectious neighbours, stay infectious for a while, then recover for good."
    )
    params = SirParams
    network = True
    metrics = (
        Metric("susceptible", "Susceptible", type="integer", unit="agents"),
        Metric("infectious", "Infectious", type="integer", unit="agents"),
        Metric("recovered", "Recovered", type="integer", unit="agents"),
        Metric(
            "new_infections",
            "New infections",
            type="integer",
            unit="agents",
            description="Agents infected this round: last round's susceptible minus this "
            "round's (round 1: the initially infectious)",
        ),
        Metric(
            "attack_rate",
            "Attack rate",
            description="Share of the population ever infected: (infectious + recovered) / agents",
        ),
        Metric(
            "n_invalid",
            "Invalid states",
            type="integer",
            unit="agents",
            description="Agents whose value was not S, I or R",
        ),
    )
    policies = (
        PolicySupport(
            "contagion",
            "Contagion",
            "infection along edges with the set transmission, recovery after the set rounds",
            rule=Contagion,
        ),
    )
    default_policy = "contagion"
    convergence_metric = "attack_rate"

    def action(self, params: SirParams) -> ChoiceAction:
        return ChoiceAction(STATES)

    def check_population(self, params: SirParams, size: int) -> list[tuple[tuple, str, Any]]:
        if params.initial_infected > size:
            message = f"at most the population's {size} agents, not {params.initial_infected}"
            return [(("initial_infected",), message, params.initial_infected)]
        return []

    def resolve(self, params: SirParams, actions: RoundActions) -> Resolution:
        valid = actions.valid
        counts = np.bincount(actions.values[valid].astype(np.int64), minlength=len(STATES))
        susceptible, infectious, recovered = (int(c) for c in counts)
        before = actions.previous_metrics.get("susceptible")
        if before is not None:
            new_infections: int | None = int(before) - susceptible
        else:
            new_infections = infectious if actions.round == 1 else None
        agents = len(actions.agent_ids)
        return Resolution(
            {
                "susceptible": susceptible,
                "infectious": infectious,
                "recovered": recovered,
                "new_infections": new_infections,
                "attack_rate": (infectious + recovered) / agents if agents else None,
                "n_invalid": actions.count(INVALID),
            }
        )

    def stop(self, params: SirParams, history: Sequence[Mapping[str, MetricValue]]):
        if history and history[-1].get("infectious") == 0:
            return "no agent is infectious"
        return None
