"""Finding the installed simulation plugins: the entry-point group `populace.simulations`, and
the rule-based policies other packages add to them: the group `populace.policies`.

The manager and every worker load plugins this one way and never import one by name. A plugin
that cannot be loaded (an import error, a class that is not a `Simulation`, a declaration that
does not hold) does not take the others down: it is listed in `broken` with the reason, and a
run of it is refused naming that reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points

from populace.plugin import NAME, PolicyEntry, PolicySupport, RulePolicy, Simulation

GROUP = "populace.simulations"
POLICY_GROUP = "populace.policies"
# The policies the runtime provides itself (the guessing game plays them natively): a plugin's
# own rule-based policies take other names.
RUNTIME_POLICIES = ("llm", "level_k", "synthetic")


@dataclass(frozen=True)
class Plugin:
    name: str  # the entry-point name
    version: str  # its distribution's version
    distribution: str
    simulation: Simulation
    # Policies other packages add (populace.policies): name -> (distribution, version).
    added: dict[str, tuple[str, str]] = field(default_factory=dict)
    extra_policies: tuple[PolicySupport, ...] = ()

    @property
    def policies(self) -> tuple[PolicySupport, ...]:
        """Every policy it can be played with: its own, then the ones other packages add."""
        return (*type(self.simulation).policies, *self.extra_policies)

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
            "group_metrics": [m.describe() for m in declared.group_metrics],
            "policies": [
                {
                    "name": p.name,
                    "title": p.title,
                    "description": p.description,
                    "uses_llm": p.uses_llm,
                    "vectorised": p.vectorised,
                    "params_schema": p.rule.params.model_json_schema() if p.rule else None,
                    "added_by": self.added[p.name][0] if p.name in self.added else None,
                }
                for p in self.policies
            ],
            "default_policy": declared.default_policy,
        }


@dataclass(frozen=True)
class Registry:
    plugins: dict[str, Plugin]
    broken: dict[str, str]  # name -> why it could not be loaded

    def versions(self) -> dict[str, str]:
        """name: version of every plugin that loads, and plugin:policy: version of every policy
        another package adds to one: what a worker reports at registration."""
        versions = {name: plugin.version for name, plugin in sorted(self.plugins.items())}
        for name, plugin in sorted(self.plugins.items()):
            for policy, (_, version) in sorted(plugin.added.items()):
                versions[added_key(name, policy)] = version
        return versions

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


# A key of Registry.versions(): a plugin's name, or plugin:policy for an added policy.
VERSION_KEY = r"^[a-z][a-z0-9_]{0,63}(:[a-z][a-z0-9_]{0,63})?$"


def added_key(plugin: str, policy: str) -> str:
    """How a policy another package adds is named among a worker's reported versions."""
    return f"{plugin}:{policy}"


def load_registry(
    points: Iterable[EntryPoint] | None = None, policy_points: Iterable[EntryPoint] | None = None
) -> Registry:
    """The plugins of these entry points, with the policies added to them (by default: the
    installed ones)."""
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
    if policy_points is None:
        policy_points = [] if points is not None else entry_points(group=POLICY_GROUP)
    _add_policies(plugins, broken, policy_points)
    return Registry(plugins, broken)


def _add_policies(
    plugins: dict[str, Plugin], broken: dict[str, str], points: Iterable[EntryPoint]
) -> None:
    """Each added policy joins its plugin's; one that cannot be loaded, plays no installed
    plugin or takes a name already taken is listed in `broken` (as plugin:policy, or
    policy:NAME when its plugin is unknown) and the plugin plays on without it."""
    points = list(points)
    claimed: dict[str, int] = {}
    for point in points:
        claimed[point.name] = claimed.get(point.name, 0) + 1
    for point in points:
        try:
            entry, dist = _load_policy(point)
        except Exception as exc:  # a user's package: any error is its, and reported
            broken[f"policy:{point.name}"] = f"{type(exc).__name__}: {exc}"
            continue
        key = added_key(entry.simulation, point.name)
        plugin = plugins.get(entry.simulation)
        if plugin is None:
            broken[key] = f"it plays {entry.simulation!r}, which is not an installed plugin"
        elif claimed[point.name] > 1:
            broken[key] = "more than one installed package registers this policy name"
        elif any(p.name == point.name for p in plugin.policies) or point.name in RUNTIME_POLICIES:
            broken[key] = f"plugin {plugin.name!r} already has a policy named {point.name!r}"
        else:
            plugins[plugin.name] = replace(
                plugin,
                added={**plugin.added, point.name: dist},
                extra_policies=(*plugin.extra_policies, entry.policy),
            )


def _load_policy(point: EntryPoint) -> tuple[PolicyEntry, tuple[str, str]]:
    entry = point.load()
    if not isinstance(entry, PolicyEntry):
        raise TypeError(f"{point.value} is not a populace.plugin.PolicyEntry")
    policy = entry.policy
    if policy.name != point.name or not re.fullmatch(NAME, point.name):
        raise ValueError(
            f"its entry-point name {point.name!r} must be its policy's name ({policy.name!r}): "
            "lower case, digits and _, from a letter"
        )
    if policy.uses_llm or not (
        isinstance(policy.rule, type) and issubclass(policy.rule, RulePolicy)
    ):
        raise TypeError(f"policy {policy.name!r}: an added policy is a populace.plugin.RulePolicy")
    dist = point.dist
    return entry, (
        dist.metadata["Name"] if dist is not None else "",
        dist.version if dist is not None else "0",
    )


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
    for kind, what in (("metrics", "metric"), ("group_metrics", "group metric")):
        names = [m.name for m in getattr(declared, kind)]
        if len(set(names)) != len(names):
            raise ValueError(f"{point.value} declares a {what} name twice")
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
