"""The sweep file: a grid over simulation config fields, and its expansion into runs.

```yaml
name: rule-by-seed
mode: sequence            # or parallel (one run at a time per population)
populations: [3]
base: {rounds: 5, policy: {kind: synthetic}}   # a simulation config without population_id
grid:
  rule: [{ratio: 0.6667, offset: 0}, {ratio: 0.5, offset: 5}]
  seed: [1, 2]
```

Grid keys are dotted paths into the simulation config; the runs are the cartesian product of
their values, first key slowest. Every point is validated as a SimulationConfig up front, so a
sweep that is stored can launch every one of its runs (the population may still refuse one).
Errors are a pydantic ValidationError whose locs name the field: ("grid", "policy.depth", 2)
for the third value of that key, ("base", "rounds") for the base, ("populations", 1)...
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from backend.db.models import INT32_MAX
from backend.documents import load_document
from backend.simulations.config import SimulationConfig, raise_at

MAX_RUNS = 256
MAX_POPULATIONS = 64
MAX_VALUES_PER_KEY = 256
# How many problems one 422 lists at most (a base error repeats at every point otherwise).
MAX_PROBLEMS = 50
DOTTED_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# Fields a sweep sets itself on each run.
POLICY_KINDS = ("llm", "level_k", "synthetic")
NOT_IN_GRID = {"population_id": "each run's population comes from `populations`"}

Params = dict[str, Any]


def params_key(params: Params) -> str:
    """A point's identity: its params as canonical JSON (how runs are matched to points)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def params_text(params: Params) -> str:
    """`rule={"ratio":0.5,"offset":5}, seed=1`: a point in a sentence."""
    return ", ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in params.items())


def set_path(config: dict[str, Any], path: str, value: Any) -> None:
    """config[a][b][c] = value for path "a.b.c", making the mappings on the way."""
    *parents, last = path.split(".")
    node = config
    for i, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parents[: i + 1])
            raise ValueError(f"{where} is not a mapping in the base, so {path} cannot be set")
        node = child
    node[last] = copy.deepcopy(value)


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    mode: Literal["sequence", "parallel"] = "sequence"
    populations: list[Annotated[int, Field(ge=1, le=INT32_MAX)]] = Field(
        min_length=1, max_length=MAX_POPULATIONS
    )
    base: dict[str, Any] = Field(
        default_factory=dict, description="a simulation config without population_id"
    )
    grid: dict[str, list[Any]] = Field(
        min_length=1,
        description="dotted paths into the simulation config (e.g. policy.depth), each with "
        f"the values to try; the runs are every combination (at most {MAX_RUNS}), first key "
        "slowest",
    )

    @field_validator("populations")
    @classmethod
    def _distinct(cls, value: list[int]) -> list[int]:
        twice = sorted({p for p in value if value.count(p) > 1})
        if twice:
            raise ValueError(f"population {twice[0]} appears twice")
        return value

    @model_validator(mode="after")
    def _grid_and_points(self) -> SweepConfig:
        problems = []
        if "population_id" in self.base:
            problems.append((("base", "population_id"), NOT_IN_GRID["population_id"], None))
        keys = list(self.grid)
        for key, values in self.grid.items():
            loc = ("grid", key)
            if not DOTTED_PATH.match(key):
                problems.append((loc, "not a dotted path of field names (e.g. policy.depth)", key))
            elif key.split(".")[0] in NOT_IN_GRID:
                problems.append((loc, NOT_IN_GRID[key.split(".")[0]], key))
            elif overlap := next((k for k in keys if k != key and key.startswith(k + ".")), None):
                problems.append((loc, f"overlaps grid key {overlap!r}: give one of them", key))
            if not values:
                problems.append((loc, "give at least one value", values))
            elif len(values) > MAX_VALUES_PER_KEY:
                problems.append((loc, f"at most {MAX_VALUES_PER_KEY} values", None))
            else:
                seen: set[str] = set()
                for i, value in enumerate(values):
                    text = params_key({"v": value})
                    if text in seen:
                        problems.append(((*loc, i), "this value appears twice", value))
                    seen.add(text)
        runs = math.prod(len(v) for v in self.grid.values())
        if runs > MAX_RUNS:
            sizes = " x ".join(str(len(v)) for v in self.grid.values())
            problems.append(
                (("grid",), f"{sizes} = {runs} runs; a sweep has at most {MAX_RUNS}", None)
            )
        raise_at("SweepConfig", problems)
        raise_at("SweepConfig", self._point_problems())
        return self

    @property
    def runs(self) -> int:
        return math.prod(len(v) for v in self.grid.values())

    def points(self) -> list[Params]:
        """Every combination of the grid's values, first key slowest."""
        keys = list(self.grid)
        return [
            dict(zip(keys, combo, strict=True)) for combo in itertools.product(*self.grid.values())
        ]

    def point_config(self, params: Params, population_id: int) -> dict[str, Any]:
        """The simulation config of one point, as a document (not validated)."""
        config = copy.deepcopy(self.base)
        for path, value in params.items():
            set_path(config, path, value)
        config["population_id"] = population_id
        return config

    def simulation_config(self, point: int, population_id: int) -> SimulationConfig:
        """Point `point` (0-based) on a population, validated; named after the sweep when the
        base and grid leave the name unset."""
        params = self.points()[point]
        config = self.point_config(params, population_id)
        if "name" not in config:
            config["name"] = f"{self.name} #{point + 1}: {params_text(params)}"[:200]
        return SimulationConfig.model_validate(config)

    def _point_problems(self) -> list[tuple[tuple[str | int, ...], str, Any]]:
        """Each point validated as a SimulationConfig; a problem inside a grid key's value is
        reported at that value, any other at the base (once, naming the first point)."""
        problems: dict[tuple[tuple[str | int, ...], str], Any] = {}
        positions = {
            key: {params_key({"v": v}): i for i, v in enumerate(vs)}
            for key, vs in self.grid.items()
        }
        for number, params in enumerate(self.points(), start=1):
            try:
                config = self.point_config(params, self.populations[0])
            except ValueError as exc:
                key = next(k for k in params if str(exc).endswith(f"{k} cannot be set"))
                problems.setdefault((("grid", key), str(exc)), str(exc))
                continue
            try:
                SimulationConfig.model_validate(config)
            except ValidationError as exc:
                for error in exc.errors(include_url=False):
                    loc = _without_union_tag(tuple(error["loc"]))
                    where = f"point {number} ({params_text(params)})"
                    key = _grid_key_of(loc, params)
                    if key is not None:
                        index = positions[key][params_key({"v": params[key]})]
                        rest = loc[len(key.split(".")) :]
                        at: tuple[str | int, ...] = ("grid", key, index, *rest)
                    else:
                        at = ("base", *loc)
                    problems.setdefault((at, error["msg"]), f"{error['msg']} (at {where})")
                    if len(problems) >= MAX_PROBLEMS:
                        break
            if len(problems) >= MAX_PROBLEMS:
                break
        return [(loc, message, None) for (loc, _), message in problems.items()]


def _without_union_tag(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """("policy", "level_k", "default_depth") -> ("policy", "default_depth"): pydantic names
    the policy's kind in the loc, the document does not."""
    if len(loc) > 1 and loc[0] == "policy" and loc[1] in POLICY_KINDS:
        return (loc[0], *loc[2:])
    return loc


def _grid_key_of(loc: tuple[Any, ...], params: Params) -> str | None:
    """The grid key whose path the error's loc lies under, if any."""
    for key in params:
        path = tuple(key.split("."))
        if loc[: len(path)] == path:
            return key
    return None


def parse_sweep(text: str) -> SweepConfig:
    """Raises ConfigError (unreadable) or ValidationError (invalid, locs name the field)."""
    return SweepConfig.model_validate(load_document(text))
