"""Runs through the manager's REST API, as users make them: create a population and wait until
it is deployed, launch a simulation and wait until it ends, read its rounds and its export.
Nothing here reaches into the manager's store or the workers."""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import dataclass

import numpy as np

from backend.client import ApiError, Client
from backend.lifecycles import decision
from backend.lifecycles import population as population_lifecycle
from backend.lifecycles import simulation as simulation_lifecycle

TERMINAL = simulation_lifecycle.FINAL
POLL_S = 0.2


class RunFailed(RuntimeError):
    """A population or a simulation did not end the way a check needs."""


@dataclass
class Run:
    simulation_id: int
    status: str
    stop_reason: str | None
    rounds: list[dict]  # GET /api/simulations/{id}/rounds items
    wall_s: float
    rounds_below_floor: int = 0  # rounds the manager kept with too few valid answers

    def metric(self, name: str) -> list:
        return [r["metrics"].get(name) for r in self.rounds]


class Runs:
    """One manager's API, with the populations a suite deployed (deleted at the end)."""

    def __init__(self, client: Client, timeout_s: float = 1800) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self.populations: list[int] = []

    def deploy(self, config: dict) -> int:
        created = self.client.create_population(json.dumps(config))
        self.populations.append(created.id)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            population = self.client.population(created.id)
            if population.status == population_lifecycle.DEPLOYED:
                return created.id
            if population.status == population_lifecycle.FAILED:
                raise RunFailed(f"population {config['name']!r} failed: {population.error}")
            time.sleep(POLL_S)
        raise RunFailed(f"population {config['name']!r} not deployed in {self.timeout_s:g} s")

    def simulate(self, config: dict) -> Run:
        started = time.monotonic()
        return self.wait(self.start(config), started)

    def start(self, config: dict) -> int:
        """Launch a simulation and return its id at once (wait() follows it to its end)."""
        return self.client.create_simulation(json.dumps(config)).id

    def wait(self, simulation_id: int, started: float) -> Run:
        """Follow a simulation until it ends; it must complete. `started` is the monotonic time
        it was launched (for the run's wall time)."""
        simulation = self.client.simulation(simulation_id)
        deadline = started + self.timeout_s
        while simulation.status not in TERMINAL:
            if simulation.status == simulation_lifecycle.PAUSED:
                raise RunFailed(f"simulation {simulation.id} paused: {simulation.pause_reason}")
            if time.monotonic() > deadline:
                raise RunFailed(f"simulation {simulation.id} not done in {self.timeout_s:g} s")
            time.sleep(POLL_S)
            simulation = self.client.simulation(simulation.id)
        if simulation.status != simulation_lifecycle.COMPLETED:
            raise RunFailed(
                f"simulation {simulation.id} {simulation.status}: "
                f"{simulation.error or simulation.cancel_reason or ''}"
            )
        rounds = [r.model_dump(mode="json") for r in self.client.rounds(simulation.id)]
        return Run(
            simulation.id,
            simulation.status,
            simulation.stop_reason,
            rounds,
            time.monotonic() - started,
            simulation.rounds_below_floor,
        )

    def export_csv(self, simulation_id: int, round: int | None = None) -> bytes:
        with self.client.export_decisions(simulation_id, format="csv", round=round) as chunks:
            return b"".join(chunks)

    def release(self, population_id: int) -> None:
        """Delete a population a check is done with (its workers' memory is freed for the next
        check), as cleanup() would at the end."""
        if population_id in self.populations:
            self.populations.remove(population_id)
            try:
                self.client.delete_population(population_id)
            except ApiError:
                pass  # already gone, or busy: the operator's to clean

    def cleanup(self) -> None:
        """Delete what the suite deployed (a shared cluster keeps no trace of it)."""
        for population_id in list(self.populations):
            self.release(population_id)


@dataclass
class Values:
    """An export as columns: round, agent number (index in the population), value (NaN when
    not valid)."""

    round: np.ndarray
    agent: np.ndarray
    value: np.ndarray


def values_of(export: bytes) -> Values:
    """Parse a CSV export (round,agent_id,value,status,response). Choice values come as the
    option's name; the caller maps those."""
    reader = csv.reader(io.StringIO(export.decode()))
    header = next(reader)
    at = {name: i for i, name in enumerate(header)}
    rounds, agents, values = [], [], []
    for row in reader:
        rounds.append(int(row[at["round"]]))
        agents.append(int(row[at["agent_id"]]) & 0xFFFFFFFF)  # id = population << 32 | number
        valid = row[at["status"]] == decision.VALID and row[at["value"]] != ""
        values.append(float(row[at["value"]]) if valid else np.nan)
    return Values(
        np.array(rounds, dtype=np.int64),
        np.array(agents, dtype=np.int64),
        np.array(values, dtype=np.float64),
    )
