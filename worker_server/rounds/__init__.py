"""Rounds on a worker process: policies, the concurrency cap, the sub-environment, aggregates."""

from worker_server.rounds.aggregate import PartialAggregate
from worker_server.rounds.errors import (
    InvalidRound,
    PluginFailed,
    RoundAlreadyRunning,
    RoundCancelled,
    RoundFailed,
)
from worker_server.rounds.llm import LlmPolicy
from worker_server.rounds.policies import (
    Cohort,
    CohortResult,
    GameRule,
    LevelKPolicy,
    Policy,
    RoundContext,
    SyntheticPolicy,
)
from worker_server.rounds.slots import AgentSlots
from worker_server.rounds.subenv import DecisionChunk, RoundSpec, SubEnvironment

__all__ = [
    "AgentSlots",
    "Cohort",
    "CohortResult",
    "DecisionChunk",
    "GameRule",
    "InvalidRound",
    "LevelKPolicy",
    "LlmPolicy",
    "PartialAggregate",
    "PluginFailed",
    "Policy",
    "RoundAlreadyRunning",
    "RoundCancelled",
    "RoundContext",
    "RoundFailed",
    "RoundSpec",
    "SubEnvironment",
    "SyntheticPolicy",
]
