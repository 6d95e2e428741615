"""The simulation config: what game to play, over which population, with which policy.

The same document is the REST body (JSON, or YAML with Content-Type application/yaml) and the
file `populace simulate FILE` reads. Every model forbids unknown keys, and checks that span
fields raise a ValidationError whose `loc` names the field (e.g. ``("rule", "max")``), so a 422
points at the exact place. Checks that need the population (its attribute names) are in
`check_against_population`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from backend.config_fields import ApiKeyEnv
from backend.db.models import INT32_MAX
from backend.documents import load_document
from backend.simulations.validity import DEFAULT_PARTICIPATION_FLOOR
from populace.plugin import NAME as PLUGIN_NAME
from populace.plugin import Simulation
from populace.registry import RUNTIME_POLICIES, Plugin, installed
from worker_server.llm import accounting
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.endpoint_rules import (
    DEFAULT_AGENT_DEADLINE_S,
    DEFAULT_API,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_RETRIES,
    DEFAULT_SERVER,
    DEFAULT_TEMPERATURE,
    MAX_AGENT_DEADLINE_S,
    MAX_BASE_URL_CHARS,
    MAX_BATCH_SIZE,
    MAX_CONCURRENCY,
    MAX_MODEL_CHARS,
    MAX_PRICE_PER_MILLION,
    MAX_RETRIES,
    MAX_ROUND_DEADLINE_S,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    Api,
    InvalidLlmRequest,
    ServerKind,
    check_batch_size,
    default_batch_size_text,
    default_concurrency_text,
    normalise_base_url,
)
from worker_server.llm.templates import (
    MAX_PROMPT_CHARS,
    Template,
    round_placeholder_limits,
    too_long,
)
from worker_server.rounds.assignment import SHARE_TOLERANCE

# An endpoint's defaults and limits are worker_server.llm.endpoint_rules': the workers check the
# same rules on every request, and the dashboard's form reads them (frontend/src/generated/).
ERROR_TYPE = "simulation_config"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
# The plugin a config without `plugin` plays (every config written before plugins).
GUESS = "guess"
# The guessing game's rule and feedback models, as its plugin declares them, found through the
# registry like any plugin's (the runtime imports none). The round loop still plays that game
# itself, so the runtime reads them (prompts, specs, estimates) until it plays any plugin.
_GUESS_PARAMS = type(installed().get(GUESS).simulation).params
RuleConfig = _GUESS_PARAMS.model_fields["rule"].annotation
FeedbackConfig = _GUESS_PARAMS.model_fields["feedback"].annotation
# The rule presets by name, (ratio, offset): for the dashboard's form (make rules).
PRESETS: dict[str, tuple[float, float]] = {
    name: RuleConfig(preset=name).resolved
    for name in get_args(get_args(RuleConfig.model_fields["preset"].annotation)[0])
}
# Bounds of the policies' numbers (level-k noise, a convergence tolerance).
MAX_ABS_BOUND = 1e6
MAX_ROUNDS = 1000
# Placeholders the worker fills in prompt templates besides the agent's attributes.
WORKER_PLACEHOLDERS = frozenset({"persona", "history", "round", "min", "max", "ratio", "offset"})
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
API_KEY_REFUSED = (
    "API keys are not accepted in a config (they would be stored and sent to every worker): "
    "name the variable that holds the key on the workers with api_key_env (e.g. api_key_env: "
    "OPENAI_API_KEY) and set that variable on every worker node (or in its "
    "POPULACE_LLM_KEYS_FILE)"
)


def _error(message: str) -> PydanticCustomError:
    # The message goes in the context so braces in it (placeholders) are never formatted.
    return PydanticCustomError(ERROR_TYPE, "{reason}", {"reason": message})


def raise_at(title: str, problems: list[tuple[tuple[str | int, ...], str, Any]]) -> None:
    """Raise one ValidationError with an entry per (loc, message, input)."""
    if problems:
        raise ValidationError.from_exception_data(
            title,
            [{"type": _error(msg), "loc": loc, "input": value} for loc, msg, value in problems],
        )


def template_placeholders(template: str) -> list[str]:
    """The {name} placeholders of a prompt template; ValueError when one is not a plain name.

    The worker replaces only {identifier}: nothing is formatted or evaluated, so attribute
    access like {persona.__class__} is refused here rather than sent.
    """
    names = []
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        if not re.fullmatch(IDENTIFIER, name):
            raise ValueError(f"placeholder {{{name}}} must be a plain name")
        names.append(name)
    return names


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Finite = Annotated[float, Field(allow_inf_nan=False)]


class PromptConfig(_Strict):
    """The paper's prompt variants (see backend.simulations.prompts), or templates of your own."""

    system: Literal["plain", "rational", "named", "roleplay"] = "plain"
    user: Literal["basic", "cot"] = "basic"
    system_template: str | None = Field(default=None, min_length=1, max_length=20_000)
    user_template: str | None = Field(default=None, min_length=1, max_length=20_000)

    @field_validator("system_template", "user_template")
    @classmethod
    def _syntax(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                template_placeholders(value)
            except ValueError as exc:
                raise _error(f"not a valid template: {exc}") from None
        return value


class PriceConfig(_Strict):
    """What an endpoint charges, for the cost estimates (US dollars per million tokens)."""

    prompt_per_million: float = Field(0.0, ge=0, le=MAX_PRICE_PER_MILLION)
    completion_per_million: float = Field(0.0, ge=0, le=MAX_PRICE_PER_MILLION)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.prompt_per_million
            + completion_tokens * self.completion_per_million
        ) / 1e6


class EndpointConfig(_Strict):
    base_url: str = Field(min_length=1, max_length=MAX_BASE_URL_CHARS)
    model: str = Field(min_length=1, max_length=MAX_MODEL_CHARS)
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description="requests in flight to this endpoint in total, over every worker process "
        "(the manager splits it between them); default by server: " + default_concurrency_text(),
    )
    server: ServerKind = DEFAULT_SERVER
    batch_size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BATCH_SIZE,
        description="prompts one request carries as a prompt array (completions API only; "
        "max_concurrency counts requests); default by server: "
        + default_batch_size_text()
        + " (1 with the chat API)",
    )
    # The variable holding the API key on the workers; the key itself never reaches the manager.
    api_key_env: ApiKeyEnv | None = None
    price: PriceConfig | None = Field(
        None,
        description="per-million-token prices in USD, for the LLM meters' cost estimates "
        "(no cost is shown without one)",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_api_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "api_key" in data:
            if data["api_key"] is not None:
                # input=None: the 422 must not echo the key back.
                raise_at("EndpointConfig", [(("api_key",), API_KEY_REFUSED, None)])
            # Configs stored before api_key_env carry "api_key": null: nothing to refuse.
            data = {k: v for k, v in data.items() if k != "api_key"}
        return data

    @model_validator(mode="after")
    def _batch_fits_server(self) -> EndpointConfig:
        if self.batch_size is not None:
            try:
                check_batch_size(self.batch_size, self.server, "batch_size")
            except InvalidLlmRequest as exc:
                raise_at("EndpointConfig", [(("batch_size",), str(exc), self.batch_size)])
        return self

    def batch_size_for(self, api: str) -> int:
        if api != "completions":
            return 1
        return self.batch_size or DEFAULT_BATCH_SIZE[self.server]

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        # The worker's own rule (it appends /v1/...: the base URL is taken with or without /v1).
        try:
            return normalise_base_url(value, "base_url")
        except InvalidLlmRequest as exc:
            raise _error(str(exc)) from None


class ModelsBy(_Strict):
    """A mixture of models by population segment: the agent's category of `attribute` picks
    its model; categories not listed use the policy's `model`."""

    attribute: str = Field(pattern=IDENTIFIER, max_length=64)
    models: dict[str, Annotated[str, Field(min_length=1, max_length=MAX_MODEL_CHARS)]] = Field(
        min_length=1
    )


class LlmPolicyConfig(_Strict):
    kind: Literal["llm"]
    endpoints: list[EndpointConfig] = Field(min_length=1, max_length=1000)
    # Default: the first endpoint's model.
    model: str | None = Field(default=None, min_length=1, max_length=MAX_MODEL_CHARS)
    models_by: ModelsBy | None = None
    # "completions" for base models (e.g. Gemma 3 270M on llama.cpp).
    api: Api = DEFAULT_API
    # Default: 16 for basic answers, 512 for chain of thought.
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    temperature: float = Field(
        default=DEFAULT_TEMPERATURE, ge=0, le=MAX_TEMPERATURE, allow_inf_nan=False
    )
    extraction_call: bool = False
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0, le=MAX_RETRIES)
    integer_answers: bool = Field(
        default=False,
        description="players report whole numbers: the rules say so, and the answer "
        "constraint (llama.cpp grammar, vLLM structured outputs) allows no decimals. Besides "
        "matching a game played over integers, it makes reading an answer distribution "
        "(identical_prompts: share) a few requests per prompt instead of hundreds",
    )
    identical_prompts: Literal["share", "each_asks"] = Field(
        default="share",
        description="agents whose whole prompt is identical are exchangeable: at temperature 0 "
        "they share one request (greedy decoding gives each of them that answer anyway); at "
        "temperature > 0, with basic answers over the completions API, a prompt more than 8 "
        "agents share has its answer distribution read once for the whole cluster from the "
        "model's log-probabilities and each of them draws its answer from it with its own seed "
        "(the same distribution as asking, with far fewer calls); a prompt fewer share is asked "
        "by each. each_asks sends one request per agent.",
    )

    @model_validator(mode="after")
    def _models_served(self) -> LlmPolicyConfig:
        served = {e.model for e in self.endpoints}
        known = ", ".join(sorted(served))
        problems = []
        if self.model is not None and self.model not in served:
            problems.append(
                (("model",), f"no endpoint serves {self.model!r} (served: {known})", self.model)
            )
        if self.models_by is not None:
            for category, model in self.models_by.models.items():
                if model not in served:
                    problems.append(
                        (
                            ("models_by", "models", category),
                            f"no endpoint serves {model!r} (served: {known})",
                            model,
                        )
                    )
        if self.api == "chat":
            for i, endpoint in enumerate(self.endpoints):
                if endpoint.batch_size is not None and endpoint.batch_size > 1:
                    problems.append(
                        (
                            ("endpoints", i, "batch_size"),
                            "must be 1 with the chat API (a chat request carries one "
                            "conversation; prompt arrays need api: completions)",
                            endpoint.batch_size,
                        )
                    )
        raise_at("LlmPolicyConfig", problems)
        return self

    @property
    def default_model(self) -> str:
        return self.model or self.endpoints[0].model

    def answering_mode(self, answer_mode: str) -> str:
        """How the workers answer agents with identical prompts (their rule, from
        worker_server.llm.accounting): per_agent, shared (temperature 0) or exchangeable. The
        game's answers are numbers, whose distribution a read can spell out."""
        readable = accounting.readable(
            self.api, answer_mode, NumberConstraint.spelled_by_top_tokens
        )
        each_asks = self.identical_prompts == "each_asks"
        return accounting.answering_mode(self.temperature, each_asks, readable)

    @property
    def models_in_use(self) -> list[str]:
        models = {self.default_model}
        if self.models_by is not None:
            models.update(self.models_by.models.values())
        return sorted(models)


class LevelKPolicyConfig(_Strict):
    """Bounded rationality, no LLM: see worker_server.rounds.policies.LevelKPolicy."""

    kind: Literal["level_k"]
    depth_attribute: str | None = Field(default=None, pattern=IDENTIFIER, max_length=64)
    depth_by_category: dict[str, Annotated[int, Field(ge=0, le=100)]] = Field(default_factory=dict)
    default_depth: int = Field(default=1, ge=0, le=100)
    noise_std: float = Field(default=0.0, ge=0, le=MAX_ABS_BOUND, allow_inf_nan=False)

    @model_validator(mode="after")
    def _attribute_given(self) -> LevelKPolicyConfig:
        if self.depth_by_category and self.depth_attribute is None:
            raise_at(
                "LevelKPolicyConfig",
                [(("depth_attribute",), "required with depth_by_category", None)],
            )
        return self


class SyntheticPolicyConfig(_Strict):
    """The paper's benchmark: wait latency_s (standing in for an LLM), answer at random."""

    kind: Literal["synthetic"]
    latency_s: float = Field(default=0.0, ge=0, le=3600, allow_inf_nan=False)


class PluginPolicyConfig(_Strict):
    """A rule-based policy the simulation's plugin declares (GET /api/plugins/NAME: policies),
    by its name, with its params."""

    kind: str = Field(pattern=PLUGIN_NAME, description="the policy's name in the plugin")
    params: dict[str, Any] = Field(
        default_factory=dict, description="the policy's params; left out, its defaults"
    )


def _policy_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in RUNTIME_POLICIES else "plugin"


PolicyConfig = Annotated[
    Annotated[LlmPolicyConfig, Tag("llm")]
    | Annotated[LevelKPolicyConfig, Tag("level_k")]
    | Annotated[SyntheticPolicyConfig, Tag("synthetic")]
    | Annotated[PluginPolicyConfig, Tag("plugin")],
    Discriminator(_policy_kind),
]

MIXED = "mixed"
MAX_MIXTURE_PARTS = 32
MAX_LABEL_CHARS = 64


def _spelled(value: Any) -> Any:
    """One policy as the config gives it: the issue and the paper write "level-k"."""
    if isinstance(value, dict) and value.get("kind") == "level-k":
        return {**value, "kind": "level_k"}
    return value


def _one_policy(value: Any) -> Any:
    if isinstance(value, dict) and value.get("kind") == MIXED:
        raise _error("a part of a mixed policy is one policy, not another mixed one")
    return _spelled(value)


# A part of a mixed policy: any one policy but a mixed one.
PartPolicy = Annotated[PolicyConfig, BeforeValidator(_one_policy)]


class SharePart(_Strict):
    share: float = Field(gt=0, le=1, allow_inf_nan=False, description="of the population")
    policy: PartPolicy
    label: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LABEL_CHARS,
        description="what the run's record and metrics_by_policy call the part; left out, "
        "its policy's kind",
    )


@dataclass(frozen=True)
class MixturePart:
    """One part of a run's policy (a plain policy is one part): who plays it and how."""

    label: str
    policy: Any  # one of PolicyConfig's models
    loc: tuple[str | int, ...]  # where the config gives it
    share: float | None = None  # by share
    categories: tuple[str, ...] = ()  # by attribute; () with an attribute: the default part


class MixedPolicyConfig(_Strict):
    """Different policies for different agents: by share of the population (exact counts,
    seeded by the run's seed), or by the agent's category of an attribute."""

    kind: Literal["mixed"]
    shares: list[SharePart] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_MIXTURE_PARTS,
        description="parts by share of the population; the shares add up to 1",
    )
    attribute: str | None = Field(
        default=None,
        pattern=IDENTIFIER,
        max_length=64,
        description="parts by this attribute's category (with by_category and default)",
    )
    by_category: dict[str, PartPolicy] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_MIXTURE_PARTS - 1,
        description="category of `attribute` -> the policy its agents play",
    )
    default: PartPolicy | None = Field(
        default=None, description="the policy of agents in categories by_category does not list"
    )

    @model_validator(mode="after")
    def _one_way(self) -> MixedPolicyConfig:
        problems: list[tuple[tuple[str | int, ...], str, Any]] = []
        by_share = self.shares is not None
        if by_share == (self.attribute is not None):
            problems.append((("shares",), "give either shares, or attribute and by_category", None))
        elif by_share:
            for name in ("by_category", "default"):
                if getattr(self, name) is not None:
                    problems.append(((name,), "only with attribute (not with shares)", None))
            total = math.fsum(part.share for part in self.shares)
            if abs(total - 1) > SHARE_TOLERANCE:
                problems.append((("shares",), f"the shares add up to {total:g}, not 1", total))
            labels = [part.label for part in self.shares if part.label is not None]
            for twice in sorted({label for label in labels if labels.count(label) > 1}):
                problems.append((("shares",), f"label {twice!r} is given twice", twice))
        else:
            for name in ("by_category", "default"):
                if getattr(self, name) is None:
                    problems.append(((name,), "required with attribute", None))
        raise_at("MixedPolicyConfig", problems)
        return self

    @property
    def parts(self) -> list[MixturePart]:
        """Its parts in order, each labelled (the default part last)."""
        if self.shares is not None:
            kinds = [part.policy.kind for part in self.shares]
            seen: dict[str, int] = {}
            out = []
            for i, part in enumerate(self.shares):
                label = part.label
                if label is None:
                    seen[kinds[i]] = seen.get(kinds[i], 0) + 1
                    label = (
                        kinds[i] if kinds.count(kinds[i]) == 1 else f"{kinds[i]} {seen[kinds[i]]}"
                    )
                out.append(MixturePart(label, part.policy, ("shares", i, "policy"), part.share))
            return out
        assert self.by_category is not None and self.default is not None
        out = [
            MixturePart(
                f"{policy.kind} ({category})", policy, ("by_category", category), None, (category,)
            )
            for category, policy in self.by_category.items()
        ]
        out.append(MixturePart(f"{self.default.kind} (default)", self.default, ("default",)))
        return out


def _top_policy_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return MIXED if kind == MIXED else _policy_kind(value)


# What a run's `policy` may be: one policy, or a mixed one.
RunPolicyConfig = Annotated[
    Annotated[LlmPolicyConfig, Tag("llm")]
    | Annotated[LevelKPolicyConfig, Tag("level_k")]
    | Annotated[SyntheticPolicyConfig, Tag("synthetic")]
    | Annotated[MixedPolicyConfig, Tag(MIXED)]
    | Annotated[PluginPolicyConfig, Tag("plugin")],
    Discriminator(_top_policy_kind),
]


class DeadlinesConfig(_Strict):
    # One agent's answer, retries included (LLM policy).
    agent_s: float = Field(
        default=DEFAULT_AGENT_DEADLINE_S, gt=0, le=MAX_AGENT_DEADLINE_S, allow_inf_nan=False
    )
    # The whole round on each worker; agents not done by then count as late. None: no limit.
    round_s: float | None = Field(default=None, gt=0, le=MAX_ROUND_DEADLINE_S, allow_inf_nan=False)


class ConvergenceConfig(_Strict):
    """Stop early once a metric's last `window` round values lie within `tolerance` of each
    other (the guessing game's mean, unless `metric` names another)."""

    window: int = Field(default=3, ge=2, le=MAX_ROUNDS)
    tolerance: float = Field(gt=0, le=MAX_ABS_BOUND, allow_inf_nan=False)
    metric: str | None = Field(
        default=None,
        pattern=PLUGIN_NAME,
        description="a metric the plugin declares; left out, the one it names for convergence",
    )


class PluginChoice(_Strict):
    """Which simulation plugin plays, and its params (their JSON Schema: GET /api/plugins/NAME)."""

    name: str = Field(
        default=GUESS,
        pattern=PLUGIN_NAME,
        description="an installed plugin's name (populace plugins list)",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="the plugin's params; left out, its defaults. Stored with every default "
        "filled in",
    )


# Fields that configs written before plugins gave at the top level: the guessing game's params.
GUESS_PARAMS_AT_TOP = ("rule", "feedback")


class SimulationConfig(_Strict):
    population_id: int = Field(ge=1, le=INT32_MAX)
    name: str | None = Field(default=None, min_length=1, max_length=200)
    rounds: int = Field(ge=1, le=MAX_ROUNDS)
    plugin: PluginChoice = Field(default_factory=PluginChoice)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    # Left out: the plugin's default policy (_default_policy), so never None once validated.
    policy: RunPolicyConfig = Field(
        default=None,
        description="who decides; left out, the plugin's default policy. kind: mixed gives "
        "different agents different policies (by share or by attribute)",
    )
    deadlines: DeadlinesConfig = Field(default_factory=DeadlinesConfig)
    segment_by: list[Annotated[str, Field(pattern=IDENTIFIER, max_length=64)]] = Field(
        default_factory=list, max_length=32
    )
    group_by: str | None = Field(
        default=None,
        pattern=IDENTIFIER,
        max_length=64,
        description="an attribute whose categories are the run's groups (RoundActions.groups: "
        "e.g. the voter's consensus and the group metrics per category); left out, a network "
        "simulation's groups are its graph's connected components",
    )
    # None: drawn at creation and stored with the run, so every run can be repeated.
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    store_responses: bool = False
    histogram_bins: int = Field(default=101, ge=1, le=10_000)
    stop_when_converged: ConvergenceConfig | None = None
    # Let rounds complete over the agents that live workers host when some cannot be hosted
    # again in time (each such agent counted `lost`); without it the run pauses instead.
    allow_partial: bool = False
    participation_floor: float = Field(
        default=DEFAULT_PARTICIPATION_FLOOR,
        ge=0,
        le=1,
        description="a round in which fewer than this share of the agents give a valid answer "
        "(unreadable, late and lost answers count against it) is below the floor: the run "
        "counts such rounds (rounds_below_floor) and is never shown as whole",
    )

    # The plugin's params, validated by its own model (the runtime reads the game's from here).
    _params: Any = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _default_policy(cls, data: Any) -> Any:
        """No policy: the plugin's default one, with its defaults."""
        if not isinstance(data, dict) or data.get("policy") is not None:
            return data
        plugin = data.get("plugin")
        name = plugin.get("name", GUESS) if isinstance(plugin, dict) else GUESS
        try:
            default = type(installed().get(name).simulation).default_policy
        except (KeyError, TypeError):
            return data  # an unknown plugin: its name is the error
        return {**data, "policy": {"kind": default}} if default is not None else data

    @model_validator(mode="before")
    @classmethod
    def _params_at_the_top(cls, data: Any) -> Any:
        """A config written before plugins gives the guessing game's rule and feedback at the
        top level: they mean plugin: {name: guess, params: {rule, feedback}}."""
        if not isinstance(data, dict) or not any(k in data for k in GUESS_PARAMS_AT_TOP):
            return data
        data = dict(data)
        plugin = data.get("plugin")
        if plugin is None:
            plugin = {"name": GUESS}
        if not isinstance(plugin, dict):
            return data  # the field's own validation says what is wrong with it
        params = plugin.get("params") or {}
        if plugin.get("name", GUESS) != GUESS or not isinstance(params, dict):
            return data  # refused as an unknown field below, which names it
        problems = [
            ((key,), f"given twice: here and in plugin.params.{key}", data[key])
            for key in GUESS_PARAMS_AT_TOP
            if key in data and key in params
        ]
        raise_at("SimulationConfig", problems)
        moved = {key: data.pop(key) for key in GUESS_PARAMS_AT_TOP if key in data}
        params = {**params, **moved}
        # Checked here too, so an error names the field where the config gives it.
        try:
            type(installed().get(GUESS).simulation).params.model_validate(params)
        except ValidationError as exc:
            raise_at(
                "SimulationConfig",
                [
                    (
                        e["loc"]
                        if e["loc"][:1] and e["loc"][0] in moved
                        else ("plugin", "params", *e["loc"]),
                        e["msg"],
                        e.get("input"),
                    )
                    for e in exc.errors()
                ],
            )
        data["plugin"] = {**plugin, "params": params}
        return data

    # First of the model's checks: the others read the game's params.
    @model_validator(mode="after")
    def _plugin_params(self) -> SimulationConfig:
        try:
            plugin = installed().get(self.plugin.name)
        except KeyError as exc:
            raise_at("SimulationConfig", [(("plugin", "name"), exc.args[0], self.plugin.name)])
        try:
            params = type(plugin.simulation).params.model_validate(self.plugin.params)
        except ValidationError as exc:
            raise_at(
                "SimulationConfig",
                [(("plugin", "params", *e["loc"]), e["msg"], e.get("input")) for e in exc.errors()],
            )
        if self.policy is None:
            message = f"required: plugin {plugin.name!r} declares no default policy"
            raise_at("SimulationConfig", [(("policy",), message, None)])
        self._check_policy(plugin)
        if plugin.name != GUESS and self.prompt != PromptConfig():
            message = f"plugin {plugin.name!r} plays rule-based policies: it has no prompts"
            raise_at("SimulationConfig", [(("prompt",), message, None)])
        self._params = params
        self.plugin.params = params.model_dump(mode="json")
        return self

    def _check_policy(self, plugin: Plugin) -> None:
        """Every part of the policy is one the plugin declares, and a mixture holds at most one
        LLM part (its endpoints are the run's)."""
        llm_parts = [p for p in self.policy_parts if isinstance(p.policy, LlmPolicyConfig)]
        if len(llm_parts) > 1:
            loc = ("policy", *llm_parts[1].loc, "kind")
            message = "a mixed policy holds at most one llm part (give it all the endpoints)"
            raise_at("SimulationConfig", [(loc, message, "llm")])
        for part in self.policy_parts:
            _check_one_policy(("policy", *part.loc), part.policy, plugin)

    @property
    def policy_parts(self) -> list[MixturePart]:
        """The policy's parts: a mixed policy's, or the one policy as a single part."""
        if isinstance(self.policy, MixedPolicyConfig):
            return self.policy.parts
        return [MixturePart(self.policy.kind, self.policy, (), 1.0)]

    @property
    def llm_part(self) -> MixturePart | None:
        """The part played by the LLM (the whole run for a plain LLM policy), if any."""
        return next((p for p in self.policy_parts if isinstance(p.policy, LlmPolicyConfig)), None)

    @property
    def llm_policy(self) -> LlmPolicyConfig | None:
        """The run's LLM policy, plain or a mixture's part: what endpoint checks, estimates
        and meters read."""
        part = self.llm_part
        return part.policy if part is not None else None

    @property
    def plays_plugin_round(self) -> bool:
        """Whether rounds go to the workers as the plugin's (RunRoundRequest.plugin): every
        plugin but the guessing game, which the runtime plays natively."""
        return self.plugin.name != GUESS

    @property
    def params(self) -> Any:
        """The plugin's params, validated by its own model."""
        return self._params

    @property
    def rule(self) -> RuleConfig:
        """The guessing game's rule (plugin.params.rule)."""
        return self._params.rule

    @property
    def feedback(self) -> FeedbackConfig:
        """The guessing game's feedback (plugin.params.feedback)."""
        return self._params.feedback

    @field_validator("policy", mode="before")
    @classmethod
    def _kind_spelling(cls, value: Any) -> Any:
        # The issue and the paper write "level-k"; accept it as well as "level_k".
        return _spelled(value)

    @model_validator(mode="after")
    def _an_integer_to_answer(self) -> SimulationConfig:
        part = self.llm_part
        if not (part is not None and part.policy.integer_answers):
            return self
        where = ("policy", *part.loc, "integer_answers")
        if self.plays_plugin_round:
            message = (
                f"plugin {self.plugin.name!r} is answered in its action's type; "
                "integer_answers is the guessing game's"
            )
            raise_at("SimulationConfig", [(where, message, True)])
        rule = self.rule
        if math.ceil(rule.min) > math.floor(rule.max):
            message = f"the rule's range [{rule.min:g}, {rule.max:g}] holds no whole number"
            raise_at("SimulationConfig", [(where, message, True)])
        return self

    @model_validator(mode="after")
    def _converges_on_a_metric(self) -> SimulationConfig:
        """stop_when_converged watches a metric the plugin declares."""
        if self.stop_when_converged is None:
            return self
        simulation = type(installed().get(self.plugin.name).simulation)
        declared = [m.name for m in simulation.metrics]
        metric = self.stop_when_converged.metric or simulation.convergence_metric
        if metric is None:
            message = f"required: plugin {self.plugin.name!r} names no metric to converge on"
        elif metric not in declared:
            known = ", ".join(declared) or "none"
            message = f"plugin {self.plugin.name!r} declares no metric {metric!r} ({known})"
        else:
            return self
        raise_at("SimulationConfig", [(("stop_when_converged", "metric"), message, metric)])
        return self

    @property
    def convergence_metric(self) -> str | None:
        """The metric stop_when_converged watches (None: the run does not stop early)."""
        if self.stop_when_converged is None:
            return None
        simulation = type(installed().get(self.plugin.name).simulation)
        return self.stop_when_converged.metric or simulation.convergence_metric

    @model_validator(mode="after")
    def _prompt_size(self) -> SimulationConfig:
        # Checked before any work: a template of many {persona}s must not make every worker
        # render megabytes per agent. The prompts module builds on this one, hence the import.
        from backend.simulations.prompts import build

        if self.prompt.system_template is None and self.prompt.user_template is None:
            return self
        texts = build(self.prompt, self.rule)
        limits = round_placeholder_limits()
        longest = Template(texts.system).longest(limits) + Template(texts.user).longest(limits)
        if longest > MAX_PROMPT_CHARS:
            field = "user_template" if self.prompt.user_template is not None else "system_template"
            message = too_long("a prompt (system and user)", longest, MAX_PROMPT_CHARS)
            raise_at("SimulationConfig", [(("prompt", field), message, None)])
        return self

    @field_validator("segment_by")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise _error(f"{', '.join(map(repr, twice))} appears twice")
        return value

    def stored(self) -> dict[str, Any]:
        """The config as persisted and shown by the API (it holds no secret: only the names of
        the workers' API key variables)."""
        return self.model_dump(mode="json")


def _check_one_policy(loc: tuple[str | int, ...], policy: Any, plugin: Plugin) -> None:
    """One policy is one the plugin can be played with: the runtime's (level_k, synthetic,
    llm) only where it lists them, a rule-based one of its own (or one another package adds to
    it) with params its model takes."""
    name, simulation = plugin.name, type(plugin.simulation)
    declared = {p.name: p for p in plugin.policies}
    support = declared.get(policy.kind)
    native = isinstance(policy, PluginPolicyConfig) == (
        support is not None and support.rule is not None
    )
    if support is None or not native:
        known = ", ".join(declared)
        message = f"plugin {name!r} has no policy {policy.kind!r} (it has: {known})"
        raise_at("SimulationConfig", [((*loc, "kind"), message, policy.kind)])
    if (
        isinstance(policy, LlmPolicyConfig)
        and name != GUESS
        and simulation.render is Simulation.render
    ):
        message = f"plugin {name!r} lists the llm policy but renders no prompts (render)"
        raise_at("SimulationConfig", [((*loc, "kind"), message, policy.kind)])
    if isinstance(policy, PluginPolicyConfig):
        try:
            policy_params = support.rule.params.model_validate(policy.params)
        except ValidationError as exc:
            raise_at(
                "SimulationConfig",
                [((*loc, "params", *e["loc"]), e["msg"], e.get("input")) for e in exc.errors()],
            )
        policy.params = policy_params.model_dump(mode="json")


def check_against_population(config: SimulationConfig, attributes: set[str]) -> None:
    """Attribute names the config uses must be the population's (raises ValidationError)."""
    known = ", ".join(sorted(attributes)) or "none"
    problems: list[tuple[tuple[str | int, ...], str, Any]] = []

    def check(loc: tuple[str | int, ...], name: str | None) -> None:
        if name is not None and name not in attributes:
            problems.append(
                (loc, f"{name!r} is not an attribute of the population (it has: {known})", name)
            )

    for i, name in enumerate(config.segment_by):
        check(("segment_by", i), name)
    check(("group_by",), config.group_by)
    if isinstance(config.policy, MixedPolicyConfig):
        check(("policy", "attribute"), config.policy.attribute)
    for part in config.policy_parts:
        policy, loc = part.policy, ("policy", *part.loc)
        if isinstance(policy, LevelKPolicyConfig):
            check((*loc, "depth_attribute"), policy.depth_attribute)
        if isinstance(policy, LlmPolicyConfig) and policy.models_by is not None:
            check((*loc, "models_by", "attribute"), policy.models_by.attribute)
    for field in ("system_template", "user_template"):
        template = getattr(config.prompt, field)
        if template is None:
            continue
        unknown = [
            p
            for p in dict.fromkeys(template_placeholders(template))
            if p not in WORKER_PLACEHOLDERS and p not in attributes
        ]
        if unknown:
            names = ", ".join(f"{{{p}}}" for p in unknown)
            allowed = ", ".join(sorted(WORKER_PLACEHOLDERS | attributes))
            problems.append(
                (("prompt", field), f"unknown placeholder {names}; known: {allowed}", template)
            )
    raise_at("SimulationConfig", problems)


def check_categories(config: SimulationConfig, counts: dict[str, dict[str, int]]) -> None:
    """A mixture by attribute names only categories the population has (counts: its agents
    per category of each attribute); raises ValidationError naming the category."""
    policy = config.policy
    if not isinstance(policy, MixedPolicyConfig) or policy.attribute not in counts:
        return
    have = counts[policy.attribute]
    known = ", ".join(map(repr, have)) or "none"
    raise_at(
        "SimulationConfig",
        [
            (
                ("policy", "by_category", category),
                f"{category!r} is not a category of {policy.attribute!r} (it has: {known})",
                category,
            )
            for category in policy.by_category or {}
            if category not in have
        ],
    )


def choices_for_clients() -> dict[str, object]:
    """The config's closed choices a client (the dashboard's launch form) offers, as JSON-able
    values: read from the models, so a new choice reaches the form with `make rules`."""

    def choices(model: type[BaseModel], field: str) -> list[str]:
        return list(get_args(model.model_fields[field].annotation))

    return {
        "RULE_PRESETS": list(PRESETS),
        "POLICY_KINDS": [
            choices(model, "kind")[0]
            for model in (LlmPolicyConfig, LevelKPolicyConfig, SyntheticPolicyConfig)
        ],
        "SYSTEM_PROMPTS": choices(PromptConfig, "system"),
        "USER_PROMPTS": choices(PromptConfig, "user"),
    }


def parse_config(text: str) -> SimulationConfig:
    """Raises ConfigError (unreadable) or ValidationError (invalid, locs name the field)."""
    return SimulationConfig.model_validate(load_document(text))


def ratio_text(ratio: float) -> str:
    """2/3 rather than 0.6666666666666666 when the ratio is a simple fraction."""
    from fractions import Fraction

    fraction = Fraction(ratio).limit_denominator(1000)
    if fraction.denominator != 1 and math.isclose(float(fraction), ratio, rel_tol=0, abs_tol=1e-12):
        return f"{fraction.numerator}/{fraction.denominator}"
    return f"{ratio:g}"
