"""An exported value is written in its run's action type, and a run whose plugin cannot say its
action (uninstalled, or params it no longer takes) exports the stored floats unchanged."""

from __future__ import annotations

from backend.simulations.export import csv_rows, jsonl_rows
from backend.simulations.export_values import NUMBER, value_type

ROWS = [(1, 7, 1.0, "valid", None), (1, 8, None, "invalid", "maybe")]


def test_each_action_type_writes_its_own_values():
    farol = value_type({"plugin": {"name": "el_farol", "params": {}}})
    goods = value_type({"plugin": {"name": "public_goods", "params": {"endowment": 5}}})
    guess = value_type({"plugin": {"name": "guess", "params": {}}})
    assert (farol.kind, farol.options) == ("choice", ("go", "stay"))
    assert csv_rows(ROWS, header=False, values=farol).splitlines() == [
        "1,7,stay,valid,",
        "1,8,,invalid,maybe",
    ]
    assert '"value":1,' in jsonl_rows(ROWS, values=goods)
    assert guess == NUMBER and '"value":1.0,' in jsonl_rows(ROWS, values=guess)


def test_a_run_whose_plugin_cannot_say_its_action_exports_floats():
    assert value_type({"plugin": {"name": "gone", "params": {}}}) == NUMBER
    assert value_type({"plugin": {"name": "el_farol", "params": {"group_size": 1}}}) == NUMBER
    assert value_type(None) == NUMBER
