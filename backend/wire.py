"""How values cross JSON to browsers. A JavaScript number holds integers exactly only up to
2^53, and seeds go to 2^63 - 1 (5561286856019017598 came back as 5561286856019018000, so a run
could not be reproduced from the dashboard): seeds are sent as decimal strings. Requests may
send a seed as a number or as such a string."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import PlainSerializer, WithJsonSchema

SEED_DESCRIPTION = "a 64-bit integer, as a decimal string (JavaScript numbers cannot hold it)"

# An int in Python, a decimal string in JSON.
Seed = Annotated[
    int,
    PlainSerializer(str, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": r"^\d+$", "description": SEED_DESCRIPTION}),
]


def config_for_browsers(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config as served: its seed (when set) as a decimal string."""
    if isinstance(config.get("seed"), int) and not isinstance(config["seed"], bool):
        return {**config, "seed": str(config["seed"])}
    return config


# The largest integer a JavaScript number holds exactly.
JS_SAFE_INTEGER = 2**53 - 1


def big_ints_for_browsers(value: Any) -> Any:
    """Free-form JSON (a sweep's grid and params) as served: every integer a JavaScript
    number cannot hold exactly (a seed, mostly) as a decimal string, at any depth."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > JS_SAFE_INTEGER else value
    if isinstance(value, dict):
        return {k: big_ints_for_browsers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [big_ints_for_browsers(v) for v in value]
    return value
