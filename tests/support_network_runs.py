"""Network simulations run on a real cluster: a population of two groups deployed with a graph,
a plugin played on it to the end, and every agent's exported value per round compared with the
in-process reference driver's (tests/support_network.py)."""

from __future__ import annotations

import csv
import io

import numpy as np

from tests.support_populations import deploy_population, population_config
from tests.support_simulations import export, finish, rounds_of, start


def online_count(manager) -> int:
    return len([w for w in manager.workers() if w["state"] == "online"])


def network_config(name: str, size: int, graph: dict | None, seed: int = 7) -> dict:
    """tests/configs/two-groups.yaml as `name` with `size` agents and this graph (none: None)."""
    config = population_config("two-groups", name=name, size=size, seed=seed)
    if graph is not None:
        config["graph"] = graph
    return config


def deploy_network(api, size: int, graph: dict, seed: int = 7) -> dict:
    """The population "network" deployed with this graph, or failed to deploy (for the test to
    look at)."""
    return deploy_population(api, network_config("network", size, graph, seed), may_fail=True)


def exported_values(api, sid: int, size: int, options: tuple[str, ...] = ()) -> list[np.ndarray]:
    """Every agent's value per round from the CSV export (NaN where it had none; a choice is
    exported as its option, read back as its index)."""
    index = {option: float(i) for i, option in enumerate(options)}
    rows = list(csv.DictReader(io.StringIO(export(api, sid, "csv").decode())))
    rounds = max(int(r["round"]) for r in rows)
    values = [np.full(size, np.nan) for _ in range(rounds)]
    for row in rows:
        if row["value"] != "":
            value = index[row["value"]] if options else float(row["value"])
            values[int(row["round"]) - 1][int(row["agent_id"]) & 0xFFFFFFFF] = value
    return values


def assert_same_run(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want), f"{len(got)} rounds played, the reference played {len(want)}"
    for number, (a, b) in enumerate(zip(got, want, strict=True), start=1):
        differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
        assert not differ.any(), (
            f"round {number}: {int(differ.sum())} agents differ from the reference, e.g. "
            f"agent {int(np.flatnonzero(differ)[0])}"
        )


def run_to_the_end(
    api, population: dict, plugin: str, params: dict, rounds: int, seed: int, options=()
) -> tuple[dict, list[dict], list[np.ndarray]]:
    """Play a plugin on a deployed population until it completes: (the run, its rounds, every
    agent's exported value per round)."""
    assert population["status"] == "deployed", population
    body = {
        "population_id": population["id"],
        "rounds": rounds,
        "seed": seed,
        "plugin": {"name": plugin, "params": params},
    }
    sid = start(api, body)["id"]
    done = finish(api, sid, timeout=240)
    assert done["status"] == "completed", done
    return done, rounds_of(api, sid), exported_values(api, sid, population["size"], options)
