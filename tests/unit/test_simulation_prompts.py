"""The paper's prompt variants, and the export's number formatting."""

from __future__ import annotations

import csv
import io
import json

from backend.simulations import prompts
from backend.simulations.config import PromptConfig, RuleConfig, template_placeholders
from backend.simulations.export import csv_rows, jsonl_rows


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
    roleplay = _build("roleplay", preset="1/2+5").system
    assert "{persona}" in roleplay and "5 plus 1/2 of the average" in roleplay
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
