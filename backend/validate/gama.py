"""GAMA-Bench's published rows (data/gama_bench.json: per-round series computed from the raw
results in CUHK-ARISE/GAMABench, each row naming its files and commit) and how a model's series
is put beside them in plain words."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("data") / "gama_bench.json"


@dataclass(frozen=True)
class Row:
    model: str
    by_round: list[float]


@cache
def _data() -> dict:
    return json.loads(DATA.read_text())


def source() -> dict:
    return _data()["source"]


def rows(game: str) -> list[Row]:
    """The published rows of a game: public_goods, el_farol or guessing."""
    return [Row(r["model"], [float(v) for v in r["by_round"]]) for r in _data()[game]["rows"]]


def setting(game: str) -> dict:
    return _data()[game].get("setting", {})


def humans(game: str) -> str:
    return _data().get("humans", {}).get(game, "")


def _trend(series: list[float], scale: float, fmt) -> str:
    """rose, fell or stayed level: the last rounds' mean against the first rounds' (three
    each, fewer in a short run), with a tenth of the scale as the margin."""
    k = min(3, max(1, len(series) // 3))
    head, tail = float(np.mean(series[:k])), float(np.mean(series[-k:]))
    word = "stayed level"
    if tail - head > 0.1 * scale:
        word = "rose"
    elif head - tail > 0.1 * scale:
        word = "fell"
    if k == 1:
        return f"it {word}"
    return f"it {word} (first {k} rounds {fmt(head)}, last {k} {fmt(tail)})"


def closest(series: list[float], published: list[Row]) -> tuple[Row, float] | None:
    """The published row nearest the series: mean absolute difference over the rounds both
    have."""
    best = None
    for row in published:
        n = min(len(series), len(row.by_round))
        if n == 0:
            continue
        gap = float(np.mean(np.abs(np.array(series[:n]) - np.array(row.by_round[:n]))))
        if best is None or gap < best[1]:
            best = (row, gap)
    return best


def describe(
    model: str, series: list[float | None], published: list[Row], what: str, scale: float
) -> str:
    """What the model did, in plain words, and which published row it resembles."""
    played = [v for v in series if v is not None]
    if not played:
        return f"{model} gave no valid answer in any round: nothing to compare."
    fmt = (lambda v: f"{v:.0%}") if scale == 1 else (lambda v: f"{v:.1f}")
    if len(series) == 1:
        text = f"{model}'s {what} was {fmt(played[0])} in its one round."
    else:
        text = (
            f"{model}'s {what} was {fmt(played[0])} in round 1 and {fmt(played[-1])} in round "
            f"{len(series)} (mean {fmt(float(np.mean(played)))}): {_trend(played, scale, fmt)}."
        )
    if missing := len(series) - len(played):
        text += f" {missing} round(s) had no valid answer."
    near = closest(played, published)
    if near is not None:
        row, gap = near
        text += (
            f" Of GAMA-Bench's published rows it is closest to {row.model} (mean difference "
            f"{fmt(gap)} per round)."
        )
        others = "; ".join(
            f"{r.model} {fmt(r.by_round[0])} → {fmt(r.by_round[-1])}"
            for r in published
            if r.by_round
        )
        text += f" Published, round 1 → last: {others}."
    return text
