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
    # Deffuant (consensus and cluster counts): `deffuant_cliques` cliques of `deffuant_clique`
    # agents (the Hegselmann–Krause population when the same), `deffuant_runs` runs of at most
    # `deffuant_rounds` rounds per epsilon for the cluster counts.
    deffuant_clique: int
    deffuant_cliques: int
    deffuant_runs: int
    deffuant_rounds: int
    # Guessing game.
    guess_agents: int
    # Reproducibility: a voter run on cliques, played twice.
    repro_agents: int
    # LLM games (with --llm): rounds of public goods and El Farol, of each guessing variant
    # with basic answers, and of the chain-of-thought one (a few hundred tokens an answer).
    llm_rounds: int = 20
    llm_guess_rounds: int = 10
    llm_cot_rounds: int = 5
    # The AgentScope study (--study agentscope): agents with education personas, rounds.
    study_agents: int = 50
    study_cot_agents: int = 10
    study_rounds: int = 5


QUICK = Sizes(
    mode="quick",
    voter_agents=10_000,
    voter_clique=10,
    sir_agents=100_000,
    sir_degree=10.0,
    sir_initial=20,
    sir_tolerance=0.015,
    # 20 cliques a run (10^7 neighbour entries at 40 held most of the suite's time: a Deffuant
    # round cost ~0.5 s): 3 runs = 60 Hegselmann–Krause replicas per ε, 20 Deffuant ones.
    hk_clique=500,
    hk_cliques=20,
    hk_runs=3,
    hk_rounds=150,
    deffuant_clique=500,
    deffuant_cliques=20,
    deffuant_runs=1,
    # Not 100: at ε = 0.1 the replicas are not settled yet (a mean of 2.8 major clusters).
    deffuant_rounds=200,
    guess_agents=10_000,
    repro_agents=2_000,
    llm_rounds=2,
    llm_guess_rounds=2,
    llm_cot_rounds=1,
    study_agents=5,
    # One chain-of-thought agent: its round is the study's slowest (~20 s an answer on 2 cores).
    study_cot_agents=1,
    study_rounds=2,
)
FULL = Sizes(
    mode="full",
    voter_agents=1_000_000,
    voter_clique=10,
    sir_agents=1_000_000,
    sir_degree=10.0,
    sir_initial=100,
    sir_tolerance=0.01,
    # N = 10^4 as issue 29 says. A clique of 10^4 has ~5·10^7 edges (10^8 neighbour entries):
    # two fit under the graph limit, and a round of both costs about 2.4 s on 2 cores. After 40
    # rounds a replica is settled, split (a gap above ε only grows) or counted undecided.
    hk_clique=10_000,
    hk_cliques=2,
    hk_runs=5,
    hk_rounds=40,
    deffuant_clique=500,
    deffuant_cliques=40,
    deffuant_runs=2,
    deffuant_rounds=200,
    guess_agents=1_000_000,
    repro_agents=100_000,
)
