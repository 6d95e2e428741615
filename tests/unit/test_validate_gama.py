"""GAMA-Bench's published rows as data (each row traced to its files in CUHK-ARISE/GAMABench)
and the plain words that put a model's series beside them."""

from __future__ import annotations

import re

import pytest

from backend.validate import gama
from backend.validate.gama import Row

GAMES = ("public_goods", "el_farol", "guessing")


@pytest.mark.parametrize("game", GAMES)
def test_every_published_row_names_its_source_files(game):
    rows = gama.rows(game)
    assert rows, f"no published rows for {game}"
    raw = gama._data()[game]["rows"]
    for row in raw:
        assert row["files"], row["model"]
        for file in row["files"]:
            assert file["path"].startswith("raw_results/"), file
            assert re.fullmatch(r"[0-9a-f]{40}", file["commit"]), file
    assert "CUHK-ARISE/GAMABench" in gama.source()["repository"]


def test_published_values_lie_in_each_games_range():
    for row in gama.rows("public_goods"):
        assert all(0 <= v <= 20 for v in row.by_round), row
    for row in gama.rows("el_farol"):
        assert all(0 <= v <= 1 for v in row.by_round), row
    for row in gama.rows("guessing"):
        assert all(0 <= v <= 100 for v in row.by_round), row


PUBLISHED = [Row("Falling", [8.0, 4.0, 0.0]), Row("Rising", [7.0, 14.0, 20.0])]


def test_a_rising_series_is_said_to_rise_and_is_put_beside_the_nearest_row():
    text = gama.describe("Gemma", [6.0, 15.0, 19.0], PUBLISHED, "mean contribution", 20)
    assert "was 6.0 in round 1 and 19.0 in round 3" in text
    assert "it rose" in text
    assert "closest to Rising" in text
    assert "Falling 8.0 → 0.0" in text and "Rising 7.0 → 20.0" in text


def test_shares_are_written_as_percentages_and_a_level_series_stays_level():
    text = gama.describe("M", [0.5, 0.52, 0.5], [], "share going", 1.0)
    assert "was 50% in round 1" in text and "stayed level" in text
    assert "closest" not in text


def test_rounds_without_a_valid_answer_are_counted_and_no_answer_at_all_is_said():
    text = gama.describe("M", [3.0, None, 2.0], PUBLISHED, "x", 20)
    assert "1 round(s) had no valid answer" in text
    assert gama.describe("M", [None, None], PUBLISHED, "x", 20) == (
        "M gave no valid answer in any round: nothing to compare."
    )


def test_guessing_variants_are_put_beside_the_basic_run_in_plain_words():
    from backend.validate.checks.llm_guess import BASELINE, VARIANTS, _against_baseline

    by_key = {v.key: v for v in VARIANTS}
    assert _against_baseline(BASELINE, [30.0], 30.0) == ""
    partly = _against_baseline(by_key["ratio_4_3"], [37.0, 54.0], 19.0)
    assert "stayed far from the maximum (last round 54.0)" in partly
    assert "climbed to the maximum" in _against_baseline(by_key["ratio_4_3"], [60.0, 95.0], 19.0)
    assert "did not climb" in _against_baseline(by_key["ratio_4_3"], [20.0, 22.0], 19.0)
    same = _against_baseline(by_key["ratio_51_100"], [20.0, 21.0], 19.0)
    assert "played 51/100 much as it played 2/3" in same
    assert "as it played 2/3" not in _against_baseline(by_key["ratio_51_100"], [40.0], 19.0)
    greedy = _against_baseline(by_key["temperature_0"], [100.0, 100.0], 19.0)
    assert "Every player answered 100 in every round" in greedy
