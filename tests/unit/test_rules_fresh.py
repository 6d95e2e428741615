"""The dashboard's copy of the Python's rules (frontend/src/generated/rules.ts) must match them
(regenerate with scripts/gen_rules.py, `make rules`)."""

import sys

import pytest

from tests.support import ROOT


@pytest.fixture
def gen_rules(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import gen_rules

    monkeypatch.setattr(sys, "argv", ["gen_rules.py", "--check"])
    return gen_rules


def test_generated_rules_are_fresh(gen_rules, capsys):
    assert gen_rules.main() == 0, capsys.readouterr().out


def test_check_notices_a_stale_file(gen_rules, tmp_path, monkeypatch, capsys):
    stale = tmp_path / "rules.ts"
    stale.write_text(gen_rules.generate().replace('"llama_cpp": 2', '"llama_cpp": 3'))
    monkeypatch.setattr(gen_rules, "OUT", stale)
    monkeypatch.setattr(gen_rules, "ROOT", tmp_path)
    assert gen_rules.main() == 1
    assert "run make rules" in capsys.readouterr().out


def test_the_file_carries_the_rules_the_dashboard_reads():
    text = (ROOT / "frontend" / "src" / "generated" / "rules.ts").read_text()
    for name in ("SERVERS", "DEFAULT_TOTAL_CONCURRENCY", "DEFAULT_BATCH_SIZE", "LIVE_STATES"):
        assert f"export const {name} = " in text
