"""Values as they cross JSON to browsers: integers beyond 2^53 as decimal strings."""

from __future__ import annotations

import json

from backend.sweeps.schemas import SweepRow
from backend.wire import JS_SAFE_INTEGER, big_ints_for_browsers, config_for_browsers

SEED = 5561286856019017598


def test_big_integers_become_strings_at_any_depth_and_nothing_else_changes():
    value = {
        "seed": SEED,
        "grid": {"seed": [1, SEED, -SEED], "rule": [{"ratio": 0.5, "offset": 5}]},
        "flag": True,
        "edge": JS_SAFE_INTEGER,
    }
    served = big_ints_for_browsers(value)
    assert served == {
        "seed": str(SEED),
        "grid": {"seed": [1, str(SEED), str(-SEED)], "rule": [{"ratio": 0.5, "offset": 5}]},
        "flag": True,
        "edge": JS_SAFE_INTEGER,
    }
    assert value["seed"] == SEED, "the stored value is left as it is"


def test_a_config_seed_is_a_string_and_a_sweep_rows_params_too():
    assert config_for_browsers({"seed": 7, "rounds": 2}) == {"seed": "7", "rounds": 2}
    row = SweepRow(point=1, params={"seed": SEED, "policy.depth": 2})
    assert json.loads(row.model_dump_json())["params"] == {"seed": str(SEED), "policy.depth": 2}
    assert row.params["seed"] == SEED
