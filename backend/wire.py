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
