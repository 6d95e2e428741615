"""A population's deploy, as the stages its progress events name, in order.

A deploy samples the agents, builds and saves their graph (when the config has one), writes
their personas, stores them and creates them on the workers; it ends deployed or failed (the
population's statuses of the same names). Stages may repeat (progress within a stage) and be
skipped (no graph, no agents on a worker); a failure may come at any point.
"""

from __future__ import annotations

from typing import Literal, get_args

from backend.lifecycles import machine
from backend.lifecycles.population import DEPLOYED, FAILED

# The stages that move agents, with the span of the deploy's progress bar each takes, in
# percent (the CLI's and, through the generated types, the dashboard's). Their `done`/`total`
# count agents through that stage.
DeployStage = Literal["sampled", "personas", "persisted", "created"]
DEPLOY_STAGES: tuple[str, ...] = get_args(DeployStage)
SAMPLED, PERSONAS, PERSISTED, CREATED = DEPLOY_STAGES
DEPLOY_STAGE_SPANS: dict[str, tuple[int, int]] = {
    SAMPLED: (0, 5),
    PERSONAS: (5, 25),
    PERSISTED: (25, 60),
    CREATED: (60, 100),
}
# The graph's steps: built (after sampling), then described and saved (after placement).
GRAPH = "graph"
GRAPH_SAVED = "graph_saved"

# Every stage a deploy reports, in the order it reaches them.
ORDER: tuple[str, ...] = (SAMPLED, GRAPH, GRAPH_SAVED, PERSONAS, PERSISTED, CREATED, DEPLOYED)
STAGES: tuple[str, ...] = (*ORDER, FAILED)
FINAL: tuple[str, ...] = (DEPLOYED, FAILED)
TRANSITIONS: dict[str, tuple[str, ...]] = {
    **{stage: (*ORDER[i:], FAILED) if stage != DEPLOYED else () for i, stage in enumerate(ORDER)},
    FAILED: (),
}
MACHINE = machine("deploy", STAGES, TRANSITIONS, final=FINAL, initial=STAGES)
check_transition = MACHINE.check


def deploy_percent(stage: str | None, done: int | None, total: int | None) -> int | None:
    """The whole deploy's percent after a progress event (None: not a deploy stage)."""
    span = DEPLOY_STAGE_SPANS.get(stage or "")
    if span is None:
        return None
    low, high = span
    within = min(done or 0, total) / total if total else 1.0
    return int(low + (high - low) * within)
