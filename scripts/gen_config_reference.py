"""Write docs/configuration.md, the reference of the population, simulation and sweep files.

    python scripts/gen_config_reference.py          # write docs/configuration.md (make docs)
    python scripts/gen_config_reference.py --check  # exit 1 when the committed page is stale

Everything comes from the pydantic models the manager validates with: the fields and their
order, types, defaults and limits (through each model's JSON schema), and descriptions from a
field's `description`, else the comment lines right above the field in the model's source.
NOTES below fill in what a model does not say (a field's `description` wins over its note, a
note over a source comment); a note on a field that no longer exists
fails the run, so the page cannot drift from the code. The output is deterministic.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from backend.populations.config import PopulationConfig  # noqa: E402
from backend.simulations.config import SimulationConfig  # noqa: E402
from backend.sweeps.config import SweepConfig  # noqa: E402
from populace.registry import installed  # noqa: E402
from worker_server.llm.templates import (  # noqa: E402
    MAX_ATTRIBUTE_CHARS,
    MAX_HISTORY_CHARS,
    MAX_PERSONA_CHARS,
    MAX_PROMPT_CHARS,
)

OUT = ROOT / "docs" / "configuration.md"

# (title, root model, what the file is, the command that takes it)
DOCUMENTS: list[tuple[str, type[BaseModel], str]] = [
    (
        "Population config",
        PopulationConfig,
        "What `populace population create FILE` and `POST /api/populations` take: the "
        "demographic distributions agents are sampled from and how each agent's persona is "
        "written. `POST /api/populations/validate` checks one without deploying it.",
    ),
    (
        "Simulation config",
        SimulationConfig,
        "What `populace simulate FILE` and `POST /api/simulations` take: the game's rule, the "
        "prompts, the policy that answers (an LLM, level-k reasoning or the synthetic "
        "benchmark), deadlines and seeds. `POST /api/simulations/estimate` checks one and says "
        "what it would ask of its LLM endpoints, without launching it.",
    ),
    *(
        (
            f"Plugin `{plugin.name}`",
            type(plugin.simulation).params,
            f"{type(plugin.simulation).title}: the params of `plugin: {{name: {plugin.name}, "
            "params: ...}` in a simulation config (`populace plugins show "
            f"{plugin.name}`).",
        )
        for plugin in installed().plugins.values()
        if plugin.distribution == "populace"  # the built-in ones: users' plugins vary
    ),
    (
        "Sweep file",
        SweepConfig,
        "What `populace sweep run FILE` and `POST /api/sweeps` take: a grid over simulation "
        "config fields, launched as one unit.",
    ),
]

# Descriptions for fields whose model has neither a description nor a comment, and for
# models without a docstring ("Model" alone) or whose cross-field rules a newcomer needs.
NOTES: dict[str, str] = {
    "PopulationConfig": "A population: its size, the seed its sampling uses, the attributes "
    "(distributions) every agent gets, how personas are written and where agents are placed. "
    "Unknown keys are refused everywhere.",
    "PopulationConfig.name": "shown in the dashboard and the CLI",
    "PopulationConfig.size": "number of agents; a manager also refuses more than its "
    "`POPULACE_MAX_POPULATION_SIZE` (10^6 by default)",
    "PopulationConfig.seed": "seeds the sampling: the same config gives the same agents",
    "PopulationConfig.distributions": "the attributes, sampled in order with exact counts per "
    "category; a new population needs at least one. A distribution may be conditioned on an "
    "earlier one",
    "PopulationConfig.persona": "how each agent's persona text is written",
    "PopulationConfig.placement": "which workers host the agents",
    "Distribution": "Give exactly one of: `categories`; `given` + "
    "`conditional` (categories per category of an earlier attribute); `bins` (integer ranges, "
    "which also give the placeholder `{name_value}`, a number drawn in the bin). Weights must "
    "sum to 1 unless `normalize` is true.",
    "Distribution.name": "the attribute's name, also its placeholder in persona templates",
    "Distribution.normalize": "scale the weights to sum to 1 instead of refusing them",
    "Distribution.categories": "the attribute's categories and their weights",
    "Distribution.given": "the earlier distribution this one is conditioned on",
    "Distribution.conditional": "for each category of `given`, this attribute's categories",
    "Distribution.bins": "integer ranges and their weights",
    "Category": "A category and its weight (names unique within the distribution).",
    "Category.name": "the category, as it appears in personas and exports",
    "Category.weight": "its share of the population (before `normalize`)",
    "Bin": "An integer range [min, max] and its weight.",
    "Bin.name": "the category name of the range",
    "Bin.min": "smallest value (inclusive)",
    "Bin.max": "largest value (inclusive), at least `min`",
    "Bin.weight": "its share of the population (before `normalize`)",
    "PersonaConfig": "How personas are written: from `template` with the agent's attributes "
    "filled in, or by an LLM from `metaprompt` on every worker in parallel (`metaprompt`, "
    "`endpoint` and `model` are then required). Placeholders must name attributes and be "
    "plain `{name}`: no conversion (`!r`) or format spec (`:>10`). "
    f"A persona can render to at most {MAX_PERSONA_CHARS:,} characters and a metaprompt "
    f"to {MAX_PROMPT_CHARS:,}, "
    "counting each placeholder at its longest category name or bin value; a longer one is "
    "refused before anything is rendered.",
    "PersonaConfig.mode": "`template`: fill the template in; `llm`: an LLM writes each persona",
    "PersonaConfig.template": "a persona with `{attribute}` placeholders; with mode `llm` the "
    "fallback for an agent whose LLM call failed",
    "PersonaConfig.metaprompt": "mode `llm`: the prompt asking the LLM to write a persona, "
    "with `{attribute}` placeholders",
    "PersonaConfig.endpoint": "mode `llm`: the OpenAI-compatible server's base URL (with or "
    "without `/v1`); the workers call its completions API",
    "PersonaConfig.model": "mode `llm`: the model name the endpoint serves",
    "PersonaConfig.max_concurrency": "mode `llm`: requests in flight per worker process",
    "PersonaConfig.timeout_s": "mode `llm`: seconds one persona request may take",
    "PersonaConfig.max_tokens": "mode `llm`: length limit of one persona",
    "SimulationConfig": "A run of the guess-a-fraction-of-the-average game on a deployed "
    "population. Attribute names it uses (`segment_by`, `depth_attribute`, "
    "`models_by.attribute`, template placeholders) must be the population's; that is checked "
    "at launch.",
    "SimulationConfig.population_id": "the deployed population that plays",
    "SimulationConfig.name": "shown in the dashboard and the CLI",
    "SimulationConfig.rounds": "rounds to play (fewer when `stop_when_converged` stops it)",
    "SimulationConfig.plugin": "the simulation that plays and its params (below: each "
    "built-in plugin's); left out, the guessing game with its defaults. A config written "
    "before plugins may give the guessing game's `rule` and `feedback` at the top level",
    "GuessParams": "What `plugin: {name: guess, params: ...}` takes.",
    "GuessParams.rule": "how the target is computed from the guesses",
    "GuessParams.feedback": "what agents are told between rounds",
    "SimulationConfig.prompt": "the prompts LLM agents are given",
    "SimulationConfig.policy": "who answers: an LLM, level-k reasoning, or the synthetic "
    "benchmark; chosen by `kind` (`level-k` is accepted for `level_k`)",
    "SimulationConfig.deadlines": "how long an answer and a round may take",
    "SimulationConfig.segment_by": "attributes whose categories get their own statistics "
    "each round",
    "SimulationConfig.store_responses": "keep every LLM answer's raw text with its decision "
    "(transcripts show it)",
    "SimulationConfig.histogram_bins": "bins of each round's histogram over [min, max]",
    "SimulationConfig.stop_when_converged": "stop early once the round means settle",
    "PromptConfig.system": "the system prompt variant (see `backend/simulations/prompts.py`)",
    "PromptConfig.user": "`basic`: answer with a number; `cot`: reason step by step first",
    "PromptConfig.system_template": "a system prompt of your own, with placeholders "
    "`{persona}`, `{history}`, `{round}`, `{min}`, `{max}`, `{ratio}`, `{offset}` and the "
    "population's attributes; system and user prompts together can render to at most "
    f"{MAX_PROMPT_CHARS:,} characters, counting `{{persona}}` as {MAX_PERSONA_CHARS:,}, "
    f"`{{history}}` as {MAX_HISTORY_CHARS:,} and an attribute as {MAX_ATTRIBUTE_CHARS}",
    "PromptConfig.user_template": "a user prompt of your own, with the same placeholders",
    "EndpointConfig": "An OpenAI-compatible server the workers call. API keys are never in a "
    "config: `api_key_env` names the variable holding it on the workers.",
    "EndpointConfig.base_url": "the server's URL, with or without `/v1`",
    "EndpointConfig.model": "the model name it serves",
    "EndpointConfig.server": "what it is: `vllm`, `llama_cpp` (e.g. `populace llm "
    "serve-local`) or any other `openai`-compatible server; picks defaults and the answer "
    "constraint the workers send",
    "EndpointConfig.api_key_env": "the environment variable holding this endpoint's API key "
    "on every worker (or in its `POPULACE_LLM_KEYS_FILE`)",
    "PriceConfig.prompt_per_million": "USD per million prompt tokens",
    "PriceConfig.completion_per_million": "USD per million completion tokens",
    "ModelsBy.attribute": "the population attribute that picks each agent's model",
    "ModelsBy.models": "model by category; every model must be served by an endpoint",
    "LlmPolicyConfig": "Agents answer with an LLM over one or more endpoints (requests for a "
    "model are shared between the endpoints serving it).",
    "LlmPolicyConfig.kind": "`llm`",
    "LlmPolicyConfig.endpoints": "the servers to call",
    "LlmPolicyConfig.model": "the model agents use, served by one of the endpoints",
    "LlmPolicyConfig.models_by": "a mixture of models by population segment",
    "LlmPolicyConfig.api": "`chat` (`/v1/chat/completions`) or `completions` "
    "(`/v1/completions`, for base models and prompt arrays)",
    "LlmPolicyConfig.max_tokens": "answer length limit; by default 16 for basic answers, 512 "
    "for chain of thought",
    "LlmPolicyConfig.temperature": "sampling temperature (servers sample by temperature alone)",
    "LlmPolicyConfig.extraction_call": "when an answer holds no number, ask the model once "
    "more to extract one (within the agent's deadline)",
    "LlmPolicyConfig.max_retries": "retries of a failed request, within the agent's deadline",
    "LevelKPolicyConfig.kind": "`level_k` (or `level-k`)",
    "LevelKPolicyConfig.depth_attribute": "the attribute whose category sets an agent's depth; "
    "required with `depth_by_category`",
    "LevelKPolicyConfig.depth_by_category": "reasoning depth by category of `depth_attribute`",
    "LevelKPolicyConfig.default_depth": "depth of agents whose category is not listed",
    "LevelKPolicyConfig.noise_std": "standard deviation of the gaussian noise added to each "
    "guess (per agent and round), clipped to the rule's range",
    "SyntheticPolicyConfig.kind": "`synthetic`",
    "SyntheticPolicyConfig.latency_s": "seconds each agent waits before answering",
    "DeadlinesConfig": "How long answers may take; an agent not done in time counts as late.",
    "ConvergenceConfig.window": "rounds compared",
    "ConvergenceConfig.tolerance": "largest spread of their means that counts as settled",
    "SweepConfig": "A grid of simulations. Every point is validated as a simulation config "
    "before anything is stored.",
    "SweepConfig.name": "shown in the dashboard and the CLI; runs are named after it",
    "SweepConfig.mode": "`sequence`: one run after another; `parallel`: at once, one run at a "
    "time per population",
    "SweepConfig.populations": "deployed populations to run on: in `sequence`, point i runs "
    "on populations[i mod n]; in `parallel`, each free population takes the next point",
}

# Limits in the JSON schema, in the order shown.
LIMITS = [
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "length >= {}"),
    ("maxLength", "length <= {}"),
    ("minItems", ">= {} items"),
    ("maxItems", "<= {} items"),
    ("minProperties", ">= {} entries"),
    ("maxProperties", "<= {} entries"),
    ("pattern", "matches `{}`"),
]


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 100_000:
        return f"{value:_}".replace("_", " ")
    return str(value)


def _anchor(name: str) -> str:
    return name.lower()


def _ref_name(schema: dict) -> str:
    return schema["$ref"].rsplit("/", 1)[-1]


def _type(schema: dict) -> str:
    """The type of a schema node in words, nested models as links to their section."""
    if "$ref" in schema:
        name = _ref_name(schema)
        return f"[{name}](#{_anchor(name)})"
    if "oneOf" in schema or "anyOf" in schema:
        options = schema.get("oneOf") or schema["anyOf"]
        words = [_type(o) for o in options if o.get("type") != "null"]
        text = " or ".join(words)
        if any(o.get("type") == "null" for o in options):
            text += " or null"
        if "discriminator" in schema:
            text += f", chosen by `{schema['discriminator']['propertyName']}`"
        return text
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict) and values:
            return f"map of string to {_type(values)}"
        return "map"
    return {
        "integer": "integer",
        "number": "number",
        "string": "string",
        "boolean": "boolean",
        None: "any",
    }[kind]


def _limits(schema: dict, prefix: str = "") -> list[str]:
    """The limits of a node, of its non-null alternatives, and of its items or values."""
    found = [prefix + fmt.format(_number(schema[key])) for key, fmt in LIMITS if key in schema]
    for option in schema.get("anyOf", []):
        if option.get("type") != "null" and "$ref" not in option:
            found += _limits(option, prefix)
    if isinstance(schema.get("items"), dict) and "$ref" not in schema["items"]:
        found += _limits(schema["items"], prefix + "each ")
    values = schema.get("additionalProperties")
    if isinstance(values, dict) and "$ref" not in values:
        found += _limits(values, prefix + "each value ")
    return found


def _default(model: type[BaseModel], name: str) -> str:
    field = model.model_fields[name]
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_unset=True)
        if not value:
            return "its fields' defaults"
    return f"`{json.dumps(value)}`"


def _source_comments(model: type[BaseModel]) -> dict[str, str]:
    """{field: the comment lines right above it in the class body}."""
    source = textwrap.dedent(inspect.getsource(model))
    lines = source.splitlines()
    comments: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            i = node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#"):
                above.insert(0, lines[i].strip().lstrip("#").strip())
                i -= 1
            if above:
                comments[node.target.id] = " ".join(above)
    return comments


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Models an annotation mentions, in order (through unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        for model in _models_in(arg):
            if model not in found:
                found.append(model)
    return found


def _walk(root: type[BaseModel]) -> list[type[BaseModel]]:
    """The root and every model nested in it, depth first in field order."""
    seen: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.append(model)
        for field in model.model_fields.values():
            for nested in _models_in(field.annotation):
                visit(nested)

    visit(root)
    return seen


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _model_section(model: type[BaseModel], schema: dict, used: set[str]) -> list[str]:
    name = model.__name__
    out = [f"### {name}", ""]
    intro = schema.get("description") or NOTES.get(name)
    if name in NOTES:
        used.add(name)
        if schema.get("description"):
            intro = f"{schema['description']} {NOTES[name]}"
    if intro:
        out += [" ".join(intro.split()), ""]
    comments = _source_comments(model)
    out += ["| field | type | default | limits | description |", "| --- | --- | --- | --- | --- |"]
    for field_name in model.model_fields:
        prop = schema["properties"][field_name]
        key = f"{name}.{field_name}"
        # The model's own words first; a note where it has none; its source comment last.
        described = prop.get("description") or NOTES.get(key) or comments.get(field_name, "")
        if key in NOTES:
            used.add(key)
        limits = "; ".join(_limits(prop)) or ""
        row = [
            f"`{field_name}`",
            _type(prop),
            _default(model, field_name),
            limits,
            " ".join(described.split()),
        ]
        out.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return out + [""]


def render() -> str:
    used: set[str] = set()
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by scripts/gen_config_reference.py from the pydantic models; do not",
        "     edit by hand: change the models (or the script's notes) and run `make docs`. -->",
        "",
        "Every config is a YAML or JSON document; unknown keys are refused, and a refusal is a "
        "422 whose `loc` names the field (the CLI prints it with the file's line). Numbers "
        "must be finite. Ready-made files are in [examples/](../examples/README.md).",
        "",
    ]
    for title, root, what in DOCUMENTS:
        schema = root.model_json_schema()
        defs = schema.get("$defs", {})
        out += [f"## {title}", "", what, ""]
        for model in _walk(root):
            model_schema = schema if model is root else defs[model.__name__]
            out += _model_section(model, model_schema, used)
    stale = sorted(set(NOTES) - used)
    if stale:
        raise SystemExit(f"notes on fields or models that do not exist: {', '.join(stale)}")
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail when the page is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run make docs", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
