"""What every check is handed: the manager's API, the sizes, where figures go, and how to say
what it is doing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backend.validate.llm import LlmTarget
from backend.validate.runs import Runs
from backend.validate.sizes import Sizes
from backend.validate.spare import SpareWorker

ONE_CATEGORY = [{"name": "group", "categories": [{"name": "all", "weight": 1}]}]
# The guessing checks' population: education levels in equal shares (the AgentScope paper's
# attribute), and for LLM players a persona saying the level.
EDUCATION = ("primary school", "high school", "bachelor's degree", "master's degree", "doctorate")
EDUCATION_PERSONA = "You are a player whose highest education is {education}."


@dataclass
class Context:
    runs: Runs
    sizes: Sizes
    out: Path
    say: Callable[[str], None]
    plugins: set[str]  # installed on the manager
    spare: SpareWorker | None = None  # a worker a check may SIGKILL (local clusters only)
    llm: LlmTarget | None = None  # the model of the LLM games (--llm)

    def population(self, name: str, size: int, graph: dict | None = None, **extra) -> int:
        """Deploy a population for a check (one distribution with one category: rule-based
        policies need no personas)."""
        config = {
            "name": f"validate-{name}",
            "size": size,
            "seed": 1,
            "distributions": extra.pop("distributions", ONE_CATEGORY),
            **extra,
        }
        if graph is not None:
            config["graph"] = graph
        self.say(f"  deploying {name}: {size:,} agents{' on ' + graph['kind'] if graph else ''}")
        return self.runs.deploy(config)

    def education_population(self, name: str, size: int, personas: bool = False) -> int:
        """A population with EDUCATION in equal shares; with personas, each agent's says its
        level (for LLM players)."""
        share = 1 / len(EDUCATION)
        distributions = [
            {"name": "education", "categories": [{"name": e, "weight": share} for e in EDUCATION]}
        ]
        extra = {"persona": {"mode": "template", "template": EDUCATION_PERSONA}} if personas else {}
        return self.population(name, size, distributions=distributions, **extra)
