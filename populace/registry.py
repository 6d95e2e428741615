"""Finding the installed simulation plugins: the entry-point group `populace.simulations`.

The manager and every worker load plugins this one way and never import one by name. A plugin
that cannot be loaded (an import error, a class that is not a `Simulation`, a declaration that
does not hold) does not take the others down: it is listed in `broken` with the reason, and a
run of it is refused naming that reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points

from populace.plugin import NAME, RulePolicy, Simulation

GROUP = "populace.simulations"
# The policies the runtime provides itself (the guessing game plays them natively): a plugin's
# own rule-based policies take other names.
RUNTIME_POLICIES = ("llm", "level_k", "synthetic")


@dataclass(frozen=True)
class Plugin:
    name: str  # the entry-point name
    version: str  # its distribution's version
    distribution: str
    simulation: Simulation

    def describe(self) -> dict:
        """The plugin as GET /api/plugins shows it."""
        declared = type(self.simulation)
        return {
            "name": self.name,
            "version": self.version,
            "distribution": self.distribution,
            "title": declared.title,
            "description": declared.description,
            "params_schema": declared.params.model_json_schema(),
            "action": self.simulation.action(declared.params()).describe(),
            "metrics": [m.describe() for m in declared.metrics],
            "policies": [
                {
                    "name": p.name,
                    "title": p.title,
                    "description": p.description,
                    "uses_llm": p.uses_llm,
                    "vectorised": p.vectorised,
                    "params_schema": p.rule.params.model_json_schema() if p.rule else None,
                }
                for p in declared.policies
            ],
            "default_policy": declared.default_policy,
        }


@dataclass(frozen=True)
class Registry:
    plugins: dict[str, Plugin]
    broken: dict[str, str]  # name -> why it could not be loaded

    def versions(self) -> dict[str, str]:
        """name: version of every plugin that loads: what a worker reports at registration."""
        return {name: plugin.version for name, plugin in sorted(self.plugins.items())}

    def get(self, name: str) -> Plugin:
        """The plugin; KeyError naming the known ones (or why this one is broken)."""
        if name in self.plugins:
            return self.plugins[name]
        if name in self.broken:
            raise KeyError(
                f"plugin {name!r} is installed but cannot be loaded: {self.broken[name]}"
            )
        known = ", ".join(sorted(self.plugins)) or "none"
        raise KeyError(f"no plugin named {name!r}; installed: {known}")


def load_registry(points: Iterable[EntryPoint] | None = None) -> Registry:
    """The plugins of these entry points (by default: the installed ones)."""
    plugins: dict[str, Plugin] = {}
    broken: dict[str, str] = {}
    for point in points if points is not None else entry_points(group=GROUP):
        if point.name in plugins or point.name in broken:
            # Two distributions claim a name: neither is trusted with it.
            plugins.pop(point.name, None)
            broken[point.name] = "more than one installed package registers this name"
            continue
        try:
            plugins[point.name] = _load(point)
        except Exception as exc:  # a user's package: any error is its, and reported
            broken[point.name] = f"{type(exc).__name__}: {exc}"
    return Registry(plugins, broken)


@lru_cache(maxsize=1)
def installed() -> Registry:
    """The installed plugins, loaded once per process."""
    return load_registry()


def _load(point: EntryPoint) -> Plugin:
    if not re.fullmatch(NAME, point.name):
        raise ValueError("a plugin name is lower case, digits and _, from a letter (<= 64)")
    declared = point.load()
    if not (isinstance(declared, type) and issubclass(declared, Simulation)):
        raise TypeError(f"{point.value} is not a populace.plugin.Simulation class")
    if not getattr(declared, "title", ""):
        raise ValueError(f"{point.value} declares no title")
    names = [m.name for m in declared.metrics]
    if len(set(names)) != len(names):
        raise ValueError(f"{point.value} declares a metric name twice")
    policies = [p.name for p in declared.policies]
    if not policies or len(set(policies)) != len(policies):
        raise ValueError(f"{point.value} declares no policies, or one twice")
    for policy in declared.policies:
        rule = policy.rule
        if rule is not None and not (isinstance(rule, type) and issubclass(rule, RulePolicy)):
            raise TypeError(f"policy {policy.name!r}: rule is not a populace.plugin.RulePolicy")
        if rule is not None and policy.name in RUNTIME_POLICIES:
            raise ValueError(f"policy {policy.name!r}: the runtime's own policy has that name")
    if declared.default_policy is not None and declared.default_policy not in policies:
        raise ValueError(f"default policy {declared.default_policy!r} is not one it declares")
    simulation = declared()
    simulation.action(declared.params())  # its defaults give an action type, or it says why
    dist = point.dist
    return Plugin(
        name=point.name,
        version=dist.version if dist is not None else "0",
        distribution=dist.metadata["Name"] if dist is not None else "",
        simulation=simulation,
    )
