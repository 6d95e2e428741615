"""How large each check runs: `--quick` (CI, a few minutes on 2 cores) and the full suite."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    mode: str
    # Voter: cliques of `voter_clique` agents.
    voter_agents: int
    voter_clique: int
    # SIR on Erdős–Rényi graphs of mean degree `sir_degree`.
    sir_agents: int
    sir_degree: float
    sir_initial: int
    sir_tolerance: float
    # Hegselmann–Krause: `hk_cliques` complete graphs of `hk_clique` agents per run, `hk_runs`
    # runs (seeds): hk_cliques * hk_runs independent replicas per epsilon.
    hk_clique: int
    hk_cliques: int
    hk_runs: int
    hk_rounds: int
    # Guessing game.
    guess_agents: int
    # Reproducibility: a voter run on cliques, played twice.
    repro_agents: int


QUICK = Sizes(
    mode="quick",
    voter_agents=10_000,
    voter_clique=10,
    sir_agents=100_000,
    sir_degree=10.0,
    sir_initial=20,
    sir_tolerance=0.015,
    hk_clique=500,
    hk_cliques=40,
    hk_runs=2,
    hk_rounds=150,
    guess_agents=10_000,
    repro_agents=2_000,
)
FULL = Sizes(
    mode="full",
    voter_agents=1_000_000,
    voter_clique=10,
    sir_agents=1_000_000,
    sir_degree=10.0,
    sir_initial=100,
    sir_tolerance=0.01,
    # A clique of 10^4 has ~5·10^7 edges: two fit under the graph limit of 10^8.
    hk_clique=10_000,
    hk_cliques=2,
    hk_runs=10,
    hk_rounds=300,
    guess_agents=1_000_000,
    repro_agents=100_000,
)
