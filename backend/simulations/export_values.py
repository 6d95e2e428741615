"""An exported decision's `value` in its plugin's action type: a number stays a number, an
integer is written without a decimal point, a choice as its option's name, a boolean as
true/false. The store keeps every action as a float (the option's index for a choice); only
exports read it back in the type.

A run whose plugin is no longer installed (or whose params it no longer takes) exports the
stored floats as they are: the export never fails for want of the plugin.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from populace.plugin import BooleanAction, ChoiceAction, IntegerAction
from populace.registry import installed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ValueType:
    """How one run's stored action values are exported."""

    kind: str = "number"  # number | integer | choice | boolean
    options: tuple[str, ...] = ()  # a choice's option names, by index

    def json(self, value: float | None) -> Any:
        """The value in a JSON line (and a Parquet column)."""
        if value is None:
            return None
        if self.kind == "integer":
            return int(value)
        if self.kind == "choice":
            return self.options[int(value)]
        if self.kind == "boolean":
            return bool(value)
        return float(value)

    def text(self, value: float | None) -> str:
        """The value in a CSV cell (numbers as Python's shortest round-trip repr)."""
        if value is None:
            return ""
        typed = self.json(value)
        if isinstance(typed, bool):
            return "true" if typed else "false"
        if isinstance(typed, float):
            return repr(typed)
        return str(typed)

    def describe(self) -> dict[str, Any]:
        """For the export's record: what `value` holds."""
        return {"kind": self.kind, **({"options": list(self.options)} if self.options else {})}


NUMBER = ValueType()


def value_type(config: Mapping[str, Any] | None) -> ValueType:
    """The value type of a stored run's config: its plugin's action with its params."""
    plugin = (config or {}).get("plugin")
    if not isinstance(plugin, Mapping):
        return NUMBER
    try:
        simulation = installed().get(plugin.get("name", "guess")).simulation
        action = simulation.action(type(simulation).params.model_validate(plugin.get("params")))
    except Exception as exc:  # not installed, params it no longer takes, or its code raised
        log.info("exporting stored floats: the run's plugin cannot say its action (%s)", exc)
        return NUMBER
    if isinstance(action, IntegerAction):
        return ValueType("integer")
    if isinstance(action, ChoiceAction):
        return ValueType("choice", tuple(action.options))
    if isinstance(action, BooleanAction):
        return ValueType("boolean")
    return NUMBER
