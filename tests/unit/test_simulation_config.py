"""The simulation config: presets, bounds, policies, and errors that name the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.documents import ConfigError
from backend.simulations.config import (
    SimulationConfig,
    check_against_population,
    parse_config,
    ratio_text,
)
from backend.simulations.spec import game_spec
from populace.registry import installed

BASE = {"population_id": 1, "rounds": 3, "policy": {"kind": "level_k"}}


def _locs(exc: ValidationError) -> list[tuple]:
    return [tuple(e["loc"]) for e in exc.errors()]


def _invalid(**changes) -> ValidationError:
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate({**BASE, **changes})
    return err.value


def test_presets_resolve_to_the_papers_rules():
    for preset, expected in [("2/3", (2 / 3, 0.0)), ("1/2+5", (0.5, 5.0)), ("51/100", (0.51, 0.0))]:
        config = SimulationConfig.model_validate({**BASE, "rule": {"preset": preset}})
        assert config.rule.resolved == expected
    default = SimulationConfig.model_validate(BASE)
    assert default.rule.resolved == (2 / 3, 0.0) and (default.rule.min, default.rule.max) == (
        0,
        100,
    )
    custom = SimulationConfig.model_validate({**BASE, "rule": {"ratio": 0.8, "min": 1, "max": 9}})
    assert custom.rule.resolved == (0.8, 0.0)


@pytest.mark.parametrize(
    "rule, loc",
    [
        ({"ratio": 0}, ("rule", "ratio")),
        ({"ratio": 1.6}, ("rule", "ratio")),
        ({"ratio": -0.5}, ("rule", "ratio")),
        ({"ratio": 0.5, "offset": float("inf")}, ("rule", "offset")),
        ({"preset": "2/3", "min": 50, "max": 50}, ("rule", "max")),
        ({"preset": "2/3", "min": 60, "max": 10}, ("rule", "max")),
        ({"preset": "2/3", "max": 1e12}, ("rule", "max")),
        ({"preset": "2/3", "ratio": 0.5}, ("rule", "ratio")),
        ({"offset": 3}, ("rule", "ratio")),
        ({"preset": "3/4"}, ("rule", "preset")),
    ],
)
def test_bad_rules_name_the_field(rule, loc):
    assert loc in _locs(_invalid(rule=rule))


@pytest.mark.parametrize("rounds", [0, -1, 1001])
def test_rounds_out_of_bounds(rounds):
    assert _locs(_invalid(rounds=rounds)) == [("rounds",)]


def test_unknown_keys_are_refused_where_they_are():
    assert ("colour",) in _locs(_invalid(colour="red"))
    assert ("rule", "colour") in _locs(_invalid(rule={"preset": "2/3", "colour": 1}))
    err = _invalid(policy={"kind": "synthetic", "depth_attribute": "x"})
    assert ("policy", "synthetic", "depth_attribute") in _locs(err)


def test_policy_kinds_and_their_options():
    level_k = SimulationConfig.model_validate(
        {
            **BASE,
            "policy": {
                "kind": "level-k",  # the paper's spelling
                "depth_attribute": "education",
                "depth_by_category": {"doctorate": 3},
                "noise_std": 2,
            },
        }
    )
    assert level_k.policy.kind == "level_k" and level_k.policy.depth_by_category == {"doctorate": 3}
    err = _invalid(policy={"kind": "level_k", "depth_by_category": {"doctorate": 3}})
    assert ("policy", "level_k", "depth_attribute") in _locs(err)
    err = _invalid(policy={"kind": "synthetic", "latency_s": -1})
    assert ("policy", "synthetic", "latency_s") in _locs(err)
    unknown = _invalid(policy={"kind": "oracle"})
    assert _locs(unknown) == [("policy", "kind")]
    assert "plugin 'guess' has no policy 'oracle' (it has: level_k, synthetic, llm)" in str(unknown)


def _llm(**policy):
    return {
        **BASE,
        "policy": {
            "kind": "llm",
            "endpoints": [
                {"base_url": "http://gpu-1:8000/v1/", "model": "llama", "server": "vllm"},
                {"base_url": "http://gpu-2:8000", "model": "qwen", "api_key_env": "QWEN_API_KEY"},
            ],
            **policy,
        },
    }


def test_llm_policy_models_must_be_served():
    config = SimulationConfig.model_validate(
        _llm(models_by={"attribute": "education", "models": {"doctorate": "qwen"}})
    )
    assert config.policy.endpoints[0].base_url == "http://gpu-1:8000"
    assert config.policy.default_model == "llama"
    assert config.policy.models_in_use == ["llama", "qwen"]
    stored = config.stored()
    assert stored["policy"]["endpoints"][1]["api_key_env"] == "QWEN_API_KEY"
    assert "api_key" not in stored["policy"]["endpoints"][1]

    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(_llm(model="gpt"))
    assert ("policy", "llm", "model") in _locs(err.value)
    assert "no endpoint serves 'gpt'" in str(err.value)
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(
            _llm(models_by={"attribute": "education", "models": {"doctorate": "gpt"}})
        )
    assert ("policy", "llm", "models_by", "models", "doctorate") in _locs(err.value)
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(
            {
                **_llm(),
                "policy": {
                    **_llm()["policy"],
                    "endpoints": [{"base_url": "ftp://x", "model": "m"}],
                },
            }
        )
    assert ("policy", "llm", "endpoints", 0, "base_url") in _locs(err.value)


def test_the_llm_spec_carries_prompts_deadlines_and_the_mixture():
    config = SimulationConfig.model_validate(
        {
            **_llm(models_by={"attribute": "education", "models": {"doctorate": "qwen"}}),
            "rule": {"preset": "1/2+5"},
            "prompt": {"system": "roleplay", "user": "cot"},
            "deadlines": {"agent_s": 7, "round_s": 60},
            "store_responses": True,
        }
    )
    spec = game_spec(config, simulation_id=9, seed=5)
    llm = spec.policy.llm
    assert spec.uses_llm and [e.model for e in llm.endpoints] == ["llama", "qwen"]
    assert llm.endpoints[1].api_key_env == "QWEN_API_KEY", "the workers get the name only"
    assert llm.endpoints[0].api_key_env == ""
    assert llm.model_attribute == "education" and dict(llm.model_by_category) == {
        "doctorate": "qwen"
    }
    assert llm.answer_mode == "cot" and llm.max_tokens == 512
    assert llm.request_timeout_s == 7 and spec.round_deadline_s == 60
    assert "5 plus 1/2 of the average" in llm.system_template
    assert "step by step" in llm.user_template and "{round}" in llm.user_template
    assert "{persona}" in llm.user_template, "the character comes after the shared text"
    assert spec.rule.ratio == 0.5 and spec.rule.offset == 5 and spec.store_responses


def test_segment_by_and_attributes_are_checked_against_the_population():
    err = _invalid(segment_by=["education", "education"])
    assert ("segment_by",) in _locs(err)
    config = SimulationConfig.model_validate(
        {
            **BASE,
            "segment_by": ["education", "shoe_size"],
            "policy": {"kind": "level_k", "depth_attribute": "height"},
            "prompt": {"user_template": "Round {round}. You studied {education}, born {planet}."},
        }
    )
    with pytest.raises(ValidationError) as err:
        check_against_population(config, {"education", "occupation"})
    locs = _locs(err.value)
    assert ("segment_by", 1) in locs and ("policy", "depth_attribute") in locs
    assert ("prompt", "user_template") in locs and "{planet}" in str(err.value)
    assert "{education}" not in str(err.value).split("unknown placeholder")[1].split(";")[0]


def test_templates_refuse_anything_but_plain_names():
    err = _invalid(prompt={"system_template": "You are {persona.__class__}"})
    assert ("prompt", "system_template") in _locs(err)


def test_documents_yaml_and_json():
    config = parse_config("population_id: 2\nrounds: 4\npolicy: {kind: synthetic, latency_s: 0}\n")
    assert config.population_id == 2 and config.policy.kind == "synthetic"
    assert (
        parse_config('{"population_id": 2, "rounds": 1, "policy": {"kind": "level_k"}}').rounds == 1
    )
    with pytest.raises(ConfigError):
        parse_config("- just\n- a list\n")
    with pytest.raises(ConfigError):
        parse_config("{not json")


def test_ratio_text_is_a_fraction_when_it_is_one():
    assert ratio_text(2 / 3) == "2/3"
    assert ratio_text(0.5) == "1/2"
    assert ratio_text(0.51) == "51/100"
    assert ratio_text(1.0) == "1"
    assert ratio_text(0.123456789) == "0.123457"


def _with_endpoint(api: str, **endpoint) -> dict:
    return {
        "population_id": 1,
        "rounds": 1,
        "policy": {
            "kind": "llm",
            "api": api,
            "endpoints": [{"base_url": "http://gpu-1:8000", "model": "m", **endpoint}],
        },
    }


def test_batch_sizes_default_by_server_and_are_refused_where_a_server_cannot_batch():
    def sent(api: str, **endpoint) -> int:
        config = SimulationConfig.model_validate(_with_endpoint(api, **endpoint))
        return game_spec(config, simulation_id=1, seed=1).policy.llm.endpoints[0].batch_size

    assert sent("completions", server="vllm") == 16
    assert sent("completions", server="openai") == 1
    assert sent("completions", server="llama_cpp") == 1
    assert sent("chat", server="vllm") == 1, "chat requests carry one conversation"
    assert sent("completions", server="openai", batch_size=64) == 64

    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(_with_endpoint("chat", server="vllm", batch_size=8))
    assert ("policy", "llm", "endpoints", 0, "batch_size") in _locs(err.value)
    assert "must be 1 with the chat API" in str(err.value)
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(
            _with_endpoint("completions", server="llama_cpp", batch_size=8)
        )
    assert ("policy", "llm", "endpoints", 0, "batch_size") in _locs(err.value)
    assert "one prompt per request" in str(err.value)
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(_with_endpoint("completions", batch_size=0))
    assert ("policy", "llm", "endpoints", 0, "batch_size") in _locs(err.value)


def test_the_llm_mode_says_how_identical_prompts_are_answered():
    from backend.simulations.spec import llm_mode

    def mode(api: str = "completions", **policy) -> str | None:
        config = _with_endpoint(api)
        config["policy"].update(policy)
        return llm_mode(SimulationConfig.model_validate(config))

    assert mode(temperature=0.7) == "exchangeable"
    assert mode(temperature=0) == "shared"
    assert mode(temperature=0.7, identical_prompts="each_asks") == "per_agent"
    assert mode("chat", temperature=0.7) == "per_agent", "a chat reply cannot be read as a tree"
    assert llm_mode(SimulationConfig.model_validate(BASE)) is None


def test_integer_answers_reach_the_rules_and_the_workers_and_need_a_whole_number_in_range():
    config = _with_endpoint("completions")
    assert (
        "a real number between 0 and 100"
        in game_spec(
            SimulationConfig.model_validate(config), simulation_id=1, seed=1
        ).policy.llm.system_template
    )
    config["policy"]["integer_answers"] = True
    llm = game_spec(SimulationConfig.model_validate(config), simulation_id=1, seed=1).policy.llm
    assert llm.integer_answers and "a whole number between 0 and 100" in llm.system_template

    config["rule"] = {"preset": "2/3", "min": 0.2, "max": 0.8}
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(config)
    assert ("policy", "integer_answers") in _locs(err.value)
    assert "holds no whole number" in str(err.value)


# -- the plugin that plays ------------------------------------------------------------------------


def test_the_plugin_and_its_params_are_named_in_one_field_and_stored_whole():
    named = SimulationConfig.model_validate(
        {**BASE, "plugin": {"name": "guess", "params": {"rule": {"preset": "1/2+5"}}}}
    )
    older = SimulationConfig.model_validate({**BASE, "rule": {"preset": "1/2+5"}})
    assert named.rule.resolved == older.rule.resolved == (0.5, 5.0)
    stored = named.stored()
    assert stored == older.stored()
    assert "rule" not in stored and "feedback" not in stored
    # Every default filled in: the stored config says the whole game.
    assert stored["plugin"]["params"] == {
        "rule": {"preset": "1/2+5", "ratio": None, "offset": None, "min": 0.0, "max": 100.0},
        "feedback": {"mean": False},
    }
    assert SimulationConfig.model_validate(stored).stored() == stored


def test_left_out_the_plugin_is_the_guessing_game_and_the_policy_its_default():
    config = SimulationConfig.model_validate({"population_id": 1, "rounds": 2})
    assert config.plugin.name == "guess" and config.policy.kind == "level_k"
    assert config.rule.resolved == (2 / 3, 0.0)


def test_an_unknown_plugin_is_refused_listing_the_installed_ones():
    error = _invalid(plugin={"name": "dice"})
    assert _locs(error) == [("plugin", "name")]
    known = ", ".join(sorted(installed().plugins))
    assert f"no plugin named 'dice'; installed: {known}" in str(error)
    assert _locs(_invalid(plugin={"name": "Dice!"})) == [("plugin", "name")]


def test_bad_params_name_the_field_where_the_config_gives_it():
    inside = _invalid(plugin={"params": {"rule": {"ratio": 2}, "colour": 1}})
    assert set(_locs(inside)) == {
        ("plugin", "params", "rule", "ratio"),
        ("plugin", "params", "colour"),
    }
    # The older spelling's errors point at the older place.
    assert _locs(_invalid(rule={"ratio": 2})) == [("rule", "ratio")]
    twice = _invalid(rule={"preset": "2/3"}, plugin={"params": {"rule": {"preset": "2/3"}}})
    assert _locs(twice) == [("rule",)] and "given twice" in str(twice)
