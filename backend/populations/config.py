"""The population config: demographic distributions and how personas are written from them.

Every model forbids unknown keys. Checks that span fields raise a ValidationError whose `loc`
names the offending field (e.g. ``("distributions", 0, "categories")``), so the API's 422 points
at the exact place in the user's document.
"""

from __future__ import annotations

import math
import string
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from backend.config_fields import ApiKeyEnv
from backend.documents import load_document
from worker_server.graphs.spec import GraphSpec, problems_for_size
from worker_server.labels import check_labels
from worker_server.llm.templates import MAX_PERSONA_CHARS, MAX_PROMPT_CHARS, too_long

WEIGHT_TOLERANCE = 1e-6
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
ERROR_TYPE = "population_config"
# A process per agent is for a few heavy agents, not for crowds: past this, many agents per
# process is the way (and a cluster rarely has more cores free).
MAX_DEDICATED_AGENTS = 4096


def _error(message: str) -> PydanticCustomError:
    # The message goes in the context so braces in it (placeholders) are never formatted.
    return PydanticCustomError(ERROR_TYPE, "{reason}", {"reason": message})


def _raise_at(title: str, problems: list[tuple[tuple[str | int, ...], str, Any]]) -> None:
    """Raise one ValidationError with an entry per (loc, message, input), locs relative."""
    if problems:
        raise ValidationError.from_exception_data(
            title,
            [{"type": _error(msg), "loc": loc, "input": value} for loc, msg, value in problems],
        )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Category(_Strict):
    name: str = Field(min_length=1, max_length=200)
    weight: float = Field(ge=0, allow_inf_nan=False)


class Bin(_Strict):
    name: str = Field(min_length=1, max_length=200)
    min: int = Field(ge=-(2**31), le=2**31 - 1)
    max: int = Field(ge=-(2**31), le=2**31 - 1)
    weight: float = Field(ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> Bin:
        if self.min > self.max:
            _raise_at(
                "Bin", [(("min",), f"min {self.min} is greater than max {self.max}", self.min)]
            )
        return self


def _check_weights(items: list[Category] | list[Bin], normalize: bool, what: str) -> None:
    if not items:
        raise _error(f"{what} must not be empty")
    seen: set[str] = set()
    for item in items:
        if item.name in seen:
            raise _error(f"{item.name!r} appears twice in {what}")
        seen.add(item.name)
    try:
        total = math.fsum(item.weight for item in items)
    except OverflowError:  # each weight is finite, their sum is not
        raise _error("weights are too large to add up; scale them down") from None
    if total <= 0:
        raise _error("weights are all 0; at least one must be positive")
    if not normalize and abs(total - 1.0) > WEIGHT_TOLERANCE:
        raise _error(f"weights sum to {total:.6g}, not 1 (set normalize: true to scale them)")


class Distribution(_Strict):
    """One attribute: plain categories, categories conditioned on an earlier attribute, or bins."""

    name: str = Field(pattern=IDENTIFIER, max_length=64)
    # Declared before the forms so their validators can read it.
    normalize: bool = False
    categories: list[Category] | None = None
    given: str | None = None
    conditional: dict[str, list[Category]] | None = None
    bins: list[Bin] | None = None

    @field_validator("categories")
    @classmethod
    def _categories(cls, value: list[Category] | None, info) -> list[Category] | None:
        if value is not None:
            _check_weights(value, info.data.get("normalize", False), "categories")
        return value

    @field_validator("bins")
    @classmethod
    def _bins(cls, value: list[Bin] | None, info) -> list[Bin] | None:
        if value is not None:
            _check_weights(value, info.data.get("normalize", False), "bins")
        return value

    @field_validator("conditional")
    @classmethod
    def _conditional(cls, value: dict[str, list[Category]] | None, info):
        if value is None:
            return value
        if not value:
            raise _error("conditional must have a branch per category of the parent")
        normalize = info.data.get("normalize", False)
        problems = []
        for parent, branch in value.items():
            try:
                _check_weights(branch, normalize, "categories")
            except PydanticCustomError as exc:
                problems.append(((parent,), exc.context["reason"], branch))
        _raise_at("Distribution.conditional", problems)
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Distribution:
        forms = [
            name
            for name, present in (
                ("categories", self.categories is not None),
                ("given + conditional", self.given is not None or self.conditional is not None),
                ("bins", self.bins is not None),
            )
            if present
        ]
        if len(forms) != 1:
            found = f"found {' and '.join(forms)}" if forms else "found none"
            _raise_at(
                "Distribution",
                [
                    (
                        (),
                        f"give exactly one of categories, given + conditional, or bins ({found})",
                        None,
                    )
                ],
            )
        if (self.given is None) != (self.conditional is None):
            missing, present = (
                ("given", "conditional") if self.given is None else ("conditional", "given")
            )
            _raise_at("Distribution", [((missing,), f"{missing} is required with {present}", None)])
        return self

    @property
    def kind(self) -> Literal["categorical", "conditional", "bins"]:
        if self.bins is not None:
            return "bins"
        return "conditional" if self.conditional is not None else "categorical"

    @property
    def category_names(self) -> list[str]:
        """Every category this attribute can take, in a fixed order (codes index into it)."""
        if self.bins is not None:
            return [b.name for b in self.bins]
        if self.categories is not None:
            return [c.name for c in self.categories]
        names: dict[str, None] = {}
        for branch in (self.conditional or {}).values():
            names.update((c.name, None) for c in branch)
        return list(names)

    @property
    def placeholders(self) -> list[str]:
        return [self.name, f"{self.name}_value"] if self.bins is not None else [self.name]

    def value_chars(self) -> dict[str, int]:
        """The longest text each of this attribute's placeholders is filled with."""
        chars = {self.name: max(map(len, self.category_names))}
        if self.bins is not None:
            chars[f"{self.name}_value"] = max(
                len(str(end)) for b in self.bins for end in (b.min, b.max)
            )
        return chars


def _template_parts(template: str) -> list[tuple[str, str | None]]:
    """(literal text, placeholder name or None) pairs of a persona template; ValueError naming
    the first placeholder that is not a plain {name}.

    Persona templates use str.format's syntax ({{ and }} are literal braces), but a conversion
    (!r) or a format spec (:>1000000000) is refused: a spec is a size the user controls, and the
    renderer below fills names in without ever formatting anything.
    """
    parts = []
    for literal, field, spec, conversion in string.Formatter().parse(template):
        if field is not None:
            if not field:
                raise ValueError("positional placeholder {} is not allowed; name an attribute")
            if not field.isidentifier():
                raise ValueError(f"placeholder {{{field}}} must be a plain attribute name")
            if conversion is not None or spec:
                written = (
                    field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
                )
                raise ValueError(
                    f"placeholder {{{written}}} must be a plain name like {{{field}}}: "
                    "conversions (!r) and format specs (:...) are not allowed"
                )
        parts.append((literal, field))
    return parts


def template_fields(template: str) -> list[str]:
    """The placeholder names in a persona template; ValueError if it is not one."""
    return [field for _, field in _template_parts(template) if field is not None]


def render_persona_template(template: str, values: dict[str, str]) -> str:
    """The template with each {name} replaced by values[name] (KeyError when missing)."""
    return "".join(
        literal + (values[field] if field is not None else "")
        for literal, field in _template_parts(template)
    )


def longest_rendering(template: str, value_chars: dict[str, int]) -> int:
    """The most characters the template renders to when {name} is at most value_chars[name]."""
    return sum(
        len(literal) + (value_chars[field] if field is not None else 0)
        for literal, field in _template_parts(template)
    )


def _check_template_syntax(value: str | None) -> str | None:
    if value is not None:
        try:
            template_fields(value)
        except ValueError as exc:
            raise _error(f"not a valid template: {exc}") from None
    return value


class PersonaConfig(_Strict):
    mode: Literal["template", "llm"] = "template"
    # Also the fallback when the LLM fails for an agent.
    template: str = Field(min_length=1, max_length=20_000)
    metaprompt: str | None = Field(default=None, min_length=1, max_length=20_000)
    endpoint: str | None = None
    model: str | None = Field(default=None, min_length=1, max_length=500)
    max_concurrency: int = Field(default=16, ge=1, le=1024)
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    max_tokens: int = Field(default=256, ge=1, le=32_768)
    # The variable holding the endpoint's API key on the workers (never the key itself).
    api_key_env: ApiKeyEnv | None = None

    _template_syntax = field_validator("template", "metaprompt")(_check_template_syntax)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return value
        url = urlparse(value)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise _error(f"{value!r} is not an http(s) URL")
        # Requests go to {endpoint}/v1/completions; accept the base URL with or without /v1.
        value = value.rstrip("/")
        return value[: -len("/v1")] if value.endswith("/v1") else value

    @model_validator(mode="after")
    def _llm_fields(self) -> PersonaConfig:
        if self.mode == "llm":
            _raise_at(
                "PersonaConfig",
                [
                    ((name,), "required when mode is llm", None)
                    for name in ("metaprompt", "endpoint", "model")
                    if getattr(self, name) is None
                ],
            )
        return self


class PlacementConfig(_Strict):
    """Which workers host the population's agents, and in what shares."""

    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="labels a worker's node must carry (all of them) to host these agents, "
        "e.g. {zone: a} to keep LLM agents near their endpoint; set with `populace worker "
        "--labels`",
    )
    spread: Literal["capacity", "even"] = Field(
        "capacity",
        description="capacity: shares proportional to each worker's free room (a node with "
        "more memory takes more); even: equal shares per worker process (each is one core, and "
        "a round lasts as long as its busiest process), as far as room allows",
    )

    dedicated_process: bool = Field(
        False,
        description="true: each agent gets a worker process of its own (a core), which hosts no "
        "other agent of any population while it holds it, for CPU-heavy agents (e.g. one that "
        "runs its own model); spread does not apply. The deploy is refused (409) unless at least "
        "as many online worker processes as agents host nothing (start workers with more "
        f"--procs or on more nodes). At most {MAX_DEDICATED_AGENTS} agents",
    )

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, selector: dict[str, str]) -> dict[str, str]:
        return check_labels(selector)


class PopulationConfig(_Strict):
    name: str = Field(min_length=1, max_length=200)
    size: int = Field(ge=1, le=10_000_000)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    distributions: list[Distribution] = Field(default_factory=list)
    persona: PersonaConfig | None = Field(
        None,
        description="how each agent's persona is written; left out, agents have none (enough "
        "for rule-based simulations; an LLM prompt's {persona} is then empty)",
    )
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    graph: GraphSpec | None = Field(
        None,
        description="the graph joining the agents (complete, erdos_renyi, watts_strogatz, "
        "barabasi_albert, cliques, or an uploaded edge_list), seeded by the population's seed; "
        "left out, no graph",
    )

    @model_validator(mode="after")
    def _cross_references(self) -> PopulationConfig:
        problems: list[tuple[tuple[str | int, ...], str, Any]] = []
        if self.graph is not None:
            problems.extend(
                (("graph", *loc), message, value)
                for loc, message, value in problems_for_size(self.graph, self.size)
            )
        earlier: dict[str, Distribution] = {}
        placeholders: set[str] = set()
        for i, dist in enumerate(self.distributions):
            loc = ("distributions", i)
            clash = next((p for p in dist.placeholders if p in placeholders), None)
            if clash is not None:
                problems.append(
                    ((*loc, "name"), f"attribute name {clash!r} is already used", dist.name)
                )
            if dist.kind == "conditional":
                problems.extend(_conditional_problems(loc, dist, earlier))
            earlier.setdefault(dist.name, dist)
            placeholders.update(dist.placeholders)
        value_chars: dict[str, int] = {}
        for dist in self.distributions:
            value_chars.update(dist.value_chars())
        # A node table's columns are attributes too, known once its upload is read
        # (backend.populations.graph checks the persona against them then).
        if not self.has_node_table:
            problems.extend(persona_problems(self.persona, value_chars, "none (no distributions)"))
        _raise_at("PopulationConfig", problems)
        return self

    @property
    def has_node_table(self) -> bool:
        return getattr(self.graph, "nodes", None) is not None

    def distribution(self, name: str) -> Distribution:
        return next(d for d in self.distributions if d.name == name)


def persona_problems(persona: PersonaConfig | None, value_chars: dict[str, int], none: str):
    """A persona's unknown placeholders, and a rendering longer than its limit, for attributes
    whose values are at most value_chars[name] long; `none` says there are no attributes."""
    known = ", ".join(sorted(value_chars)) or none
    for field, limit in (("template", MAX_PERSONA_CHARS), ("metaprompt", MAX_PROMPT_CHARS)):
        text = getattr(persona, field) if persona is not None else None
        if text is None:
            continue
        unknown = [f for f in dict.fromkeys(template_fields(text)) if f not in value_chars]
        if unknown:
            names = ", ".join(f"{{{f}}}" for f in unknown)
            yield (("persona", field), f"unknown placeholder {names}; known: {known}", text)
            continue
        # Checked before any persona is rendered: one config must not cost gigabytes.
        longest = longest_rendering(text, value_chars)
        if longest > limit:
            what = "the persona" if field == "template" else "the metaprompt"
            yield (("persona", field), too_long(what, longest, limit), None)


def _conditional_problems(loc: tuple, dist: Distribution, earlier: dict[str, Distribution]):
    parent = earlier.get(dist.given)
    if parent is None:
        known = ", ".join(earlier) or "none"
        yield (
            (*loc, "given"),
            f"{dist.given!r} is not an earlier distribution (earlier: {known})",
            dist.given,
        )
        return
    parent_categories = parent.category_names
    for key in dist.conditional:
        if key not in parent_categories:
            yield (
                (*loc, "conditional", key),
                f"{key!r} is not a category of {parent.name!r}",
                key,
            )
    missing = [c for c in parent_categories if c not in dist.conditional]
    if missing:
        yield (
            (*loc, "conditional"),
            f"no branch for {parent.name} = {', '.join(map(repr, missing))}; "
            "every parent category needs one",
            list(dist.conditional),
        )


def parse_config(text: str) -> PopulationConfig:
    """Read a config from YAML or JSON text.

    Raises ConfigError when the text cannot be read, pydantic's ValidationError when it is read
    but invalid.
    """
    return PopulationConfig.model_validate(load_document(text))


def check_submission(config: PopulationConfig, max_size: int) -> None:
    """What a new population must also satisfy (stored configs are re-read without it): at
    least one distribution, and at most `max_size` agents. Raises ValidationError."""
    problems: list[tuple[tuple[str | int, ...], str, Any]] = []
    node_table = getattr(config.graph, "nodes", None) is not None
    if not config.distributions and not node_table:
        problems.append(
            (
                ("distributions",),
                "give at least one distribution: without one every agent is the same",
                [],
            )
        )
    if config.size > max_size:
        problems.append(
            (
                ("size",),
                f"size {config.size} is more than this manager's limit of {max_size} agents "
                "(setting max_population_size, POPULACE_MAX_POPULATION_SIZE)",
                config.size,
            )
        )
    if config.placement.dedicated_process and config.size > MAX_DEDICATED_AGENTS:
        problems.append(
            (
                ("placement", "dedicated_process"),
                f"size {config.size} is more than {MAX_DEDICATED_AGENTS}, the most agents a "
                "population with a dedicated process per agent may have; leave "
                "dedicated_process out to host many agents per process",
                True,
            )
        )
    _raise_at("PopulationConfig", problems)
