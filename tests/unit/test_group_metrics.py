"""Group metrics (populace.plugin.Resolution.group_metrics): the built-in plugins' figures per
group against a group-by-group reference, the runtime's check of a plugin's arrays, and their
storage and export formats."""

from __future__ import annotations

import numpy as np
import pytest

from backend.simulations import group_store
from backend.simulations.group_export import _column, csv_chunk, jsonl_chunk
from backend.simulations.outcome import PluginFailed, resolve
from populace.builtins.bounded_confidence import BoundedConfidence, by_group
from populace.builtins.voter import Voter, first_round
from populace.plugin import INVALID, VALID, Metric, Params, Resolution, RoundActions, Simulation


def actions(values, groups, status=None, round_number=1, before=None) -> RoundActions:
    n = len(values)
    return RoundActions(
        round_number,
        np.arange(n, dtype=np.int64),
        np.asarray(values, dtype=np.float64),
        np.zeros(n, dtype=np.uint8) if status is None else np.asarray(status, dtype=np.uint8),
        groups=np.asarray(groups, dtype=np.int64),
        previous_group_metrics=before or {},
    )


def test_a_groups_consensus_round_is_the_first_round_it_was_unanimous_and_stays():
    first = first_round(np.array([True, False, False]), 2, None)
    assert np.array_equal(first[:1], [2.0]) and np.isnan(first[1:]).all()
    later = first_round(np.array([True, True, False]), 3, first)
    assert later[0] == 2.0 and later[1] == 3.0 and np.isnan(later[2])
    # A run whose groups changed in number (not this runtime's) starts again.
    assert first_round(np.array([True]), 4, first).tolist() == [4.0]


def test_voter_reports_each_groups_share_and_consensus_round():
    sim = Voter()
    params = sim.params()
    #                 group 0: unanimous 1s | group 1: mixed | group 2: unanimous 0s, one invalid
    played = actions(
        [1, 1, 1, 0, 1, 0, 0, 0, np.nan],
        [0, 0, 0, 1, 1, 1, 2, 2, 2],
        status=[VALID] * 8 + [INVALID],
        round_number=5,
        before={"consensus_round": np.array([4.0, np.nan, np.nan])},
    )
    out = sim.resolve(params, played).group_metrics
    assert out["share_ones"].tolist()[:2] == [1.0, pytest.approx(1 / 3)]
    assert out["share_ones"][2] == 0.0
    # Group 0 got there in round 4 and keeps it; group 2 has an invalid member: not unanimous.
    assert out["consensus_round"][0] == 4.0 and np.isnan(out["consensus_round"][1:]).all()
    assert sim.resolve(params, played).metrics["groups_at_consensus"] == 1


@pytest.mark.parametrize("epsilon", [0.05, 0.2])
def test_bounded_confidence_groups_match_a_group_by_group_reference(epsilon):
    rng = np.random.default_rng(4)
    n = 3000
    values = rng.random(n)
    groups = np.sort(rng.integers(0, 40, n))
    groups[groups == 7] = 8  # group 7 has no agent: no values
    status = np.where(rng.random(n) < 0.05, INVALID, VALID)
    values[status == INVALID] = np.nan
    played = actions(values, groups, status)
    sim = BoundedConfidence()
    params = sim.params(model="hegselmann_krause", epsilon=epsilon)
    got = sim.resolve(params, played).group_metrics
    for g in range(40):
        mine = np.sort(values[(groups == g) & (status == VALID)])
        if not len(mine):
            assert np.isnan(got["mean"][g]) and np.isnan(got["clusters"][g]), g
            continue
        assert got["mean"][g] == pytest.approx(mine.mean())
        assert got["spread"][g] == mine[-1] - mine[0]
        assert got["clusters"][g] == 1 + np.count_nonzero(np.diff(mine) > epsilon)


def test_one_group_reads_the_sorted_opinions_it_is_given():
    values = np.array([0.1, 0.9, 0.15, 0.5])
    played = actions(values, np.zeros(4))
    got = by_group(played, 0.2, np.sort(values))
    assert got["clusters"].tolist() == [3.0] and got["spread"][0] == pytest.approx(0.8)


class Grouped(Simulation):
    title = "grouped"
    group_metrics = (Metric("size", "Size"), Metric("flag", "Flag"))

    def __init__(self, given):
        self.given = given

    def resolve(self, params, actions):
        return Resolution({}, group_metrics=self.given)


def test_a_plugin_that_breaks_its_group_metrics_declaration_fails_with_the_reason():
    played = actions([1.0], [0])
    for given, words in (
        ({"other": np.ones(2)}, "not declared in group_metrics"),
        ({"size": np.ones((2, 2))}, "one number per group"),
        ({"size": np.ones(2), "flag": np.ones(3)}, "the same count"),
    ):
        with pytest.raises(PluginFailed, match=words):
            resolve("grouped", Grouped(given), Params(), played)
    kept = resolve("grouped", Grouped({"size": [1, 2]}), Params(), played).group_metrics
    assert kept["size"].dtype == np.float64 and kept["size"].tolist() == [1.0, 2.0]


def test_stored_values_come_back_exactly_and_a_wrong_count_is_refused():
    values = np.array([0.1, np.nan, 3.0, 1e300])
    back = group_store.unpack(group_store.pack(values), 4)
    assert np.array_equal(back, values, equal_nan=True)
    with pytest.raises(ValueError, match="holds 4 values, not 5"):
        group_store.unpack(group_store.pack(values), 5)


def test_the_export_writes_a_row_per_group_with_empty_cells_for_no_value():
    columns = [_column(np.array([2.0, np.nan]), 3), _column(np.array([0.5, 1.0, 0.25]), 3)]
    assert csv_chunk(7, 10, columns) == "7,10,2.0,0.5\n7,11,,1.0\n7,12,,0.25\n"
    lines = jsonl_chunk(7, 10, ["a", "b"], columns).splitlines()
    assert lines[1] == '{"round": 7, "group": 11, "values": {"a": null, "b": 1.0}}'


def test_a_run_grouped_by_an_attribute_exports_each_groups_label_quoted():
    columns = [_column(np.array([1.0, 0.5, 0.0]), 3)]
    text = csv_chunk(1, 0, columns, ['a "b", c', "d"])
    assert text == '1,0,"a ""b"", c",1.0\n1,1,d,0.5\n1,2,,0.0\n'
    line = jsonl_chunk(1, 1, ["x"], columns, ["a", "d"]).splitlines()[0]
    assert line == '{"round": 1, "group": 1, "label": "d", "values": {"x": 1.0}}'
