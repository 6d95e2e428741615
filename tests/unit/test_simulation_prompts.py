"""The paper's prompt variants, and the export's number formatting."""

from __future__ import annotations

import csv
import io
import json
from typing import get_args

from backend.simulations import prompts
from backend.simulations.config import PromptConfig, RuleConfig, template_placeholders
from backend.simulations.export import csv_rows, jsonl_rows
from worker_server.llm.protocol import Generation

SystemVariant = PromptConfig.model_fields["system"].annotation
AnswerMode = PromptConfig.model_fields["user"].annotation


def _build(system="plain", user="basic", **rule):
    rule = rule or {"preset": "2/3"}
    return prompts.build(PromptConfig(system=system, user=user), RuleConfig(**rule))


def test_system_variants_state_the_rule_in_the_papers_terms():
    plain = _build(preset="2/3").system
    assert "between 0 and 100, inclusive" in plain
    assert "closest to 2/3 of the average of all reported numbers" in plain
    assert "rational" not in plain and "{persona}" not in plain
    assert "All players are rational." in _build("rational", preset="2/3").system
    named = _build("named", preset="51/100").system
    assert '"guess 2/3 of the average"' in named and "closest to 51/100 of the average" in named
    roleplay = _build("roleplay", preset="1/2+5")
    assert "5 plus 1/2 of the average" in roleplay.system
    assert "{persona}" not in roleplay.system and "# Character\n{persona}" in roleplay.user
    custom = _build(ratio=0.8, offset=-2, min=1, max=9).system
    assert "between 1 and 9" in custom and "2 minus 4/5 of the average" in custom


def test_user_modes_and_placeholders_left_for_the_worker():
    basic, cot = _build().user, _build(user="cot").user
    assert "directly" in basic and "step by step" not in basic
    assert "step by step" in cot
    for texts in (_build(), _build("roleplay", "cot")):
        names = set(template_placeholders(texts.system) + template_placeholders(texts.user))
        assert names <= {"persona", "history", "round"}, names
    assert _build(user="cot").answer_mode == "cot"


SHARED = {"round", "min", "max", "ratio", "offset"}


def _prompt(texts: prompts.Prompts) -> str:
    """What the model reads: the completions prompt (chat sends the same two parts in order)."""
    return Generation(api="completions", model="m", system=texts.system, user=texts.user).body(
        "llama_cpp"
    )["prompt"]


def test_default_prompts_put_what_agents_share_before_what_is_their_own():
    """Prefix caches reuse only a common prefix: no per-agent placeholder ({persona},
    {history}, an attribute) before the last shared one, and the answer cue stays last."""
    cases = [(s, u) for s in get_args(SystemVariant) for u in get_args(AnswerMode)]
    assert len(cases) == 8
    for system, user in cases:
        texts = _build(system, user)
        text = _prompt(texts)
        names = template_placeholders(text)
        own = [i for i, n in enumerate(names) if n not in SHARED]
        shared = [i for i, n in enumerate(names) if n in SHARED]
        assert own and shared, (system, user, names)
        assert min(own) > max(shared), (system, user, names)
        assert ("{persona}" in text) == (system == "roleplay"), (system, user)
        tail = text[text.rindex("}") + 1 :]
        assert tail.endswith("Answer:" if user == "basic" else '"Answer: <number>".'), tail
        assert text.index("# Game rules") < text.index("{round}")
    # A user template of one's own with the roleplay variant: the character ends the system.
    texts = prompts.build(
        PromptConfig(system="roleplay", user_template="Round {round}. {history}\nAnswer:"),
        RuleConfig(preset="2/3"),
    )
    assert texts.system.endswith("# Character\n{persona}\n")
    assert texts.system.index("# Note") < texts.system.index("{persona}")


def test_custom_templates_replace_the_variants():
    texts = prompts.build(
        PromptConfig(system_template="S {education}", user_template="U {round}"),
        RuleConfig(preset="2/3"),
    )
    assert (texts.system, texts.user, texts.answer_mode) == ("S {education}", "U {round}", "basic")


ROWS = [
    (1, 4294967296, 0.30000000000000004, "valid", None),
    (1, 4294967297, None, "invalid", 'he said "fifty", then, 50'),
    (2, 4294967296, 10.0, "valid", "10"),
    (2, 4294967297, None, "late", None),
]


def test_csv_is_parseable_and_numbers_round_trip():
    text = csv_rows(ROWS, header=True)
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0] == ["round", "agent_id", "value", "status", "response"]
    assert parsed[1] == ["1", "4294967296", "0.30000000000000004", "valid", ""]
    assert parsed[2][4] == 'he said "fifty", then, 50' and parsed[2][2] == ""
    assert float(parsed[3][2]) == 10.0
    assert csv_rows(ROWS, header=False) == text.split("\n", 1)[1]


def test_jsonl_is_one_object_per_line():
    lines = jsonl_rows(ROWS).splitlines()
    assert len(lines) == 4
    first = json.loads(lines[0])
    assert first == {
        "round": 1,
        "agent_id": 4294967296,
        "value": 0.30000000000000004,
        "status": "valid",
        "response": None,
    }
    assert json.loads(lines[3])["value"] is None
