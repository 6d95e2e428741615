"""A decision's status: how an agent's answer in a round counted. Written once, with the round.

The plugin SDK (populace.plugin) owns the names and their codes (the uint8 a round's arrays
carry); this module gives the manager their names as constants and their (trivial) table.
"""

from __future__ import annotations

from typing import Literal

from backend.lifecycles import machine
from populace.plugin import INVALID as INVALID_CODE
from populace.plugin import LATE as LATE_CODE
from populace.plugin import LOST as LOST_CODE
from populace.plugin import STATUS_NAMES
from populace.plugin import VALID as VALID_CODE

DECISION_STATUSES: tuple[str, ...] = STATUS_NAMES
DecisionStatus = Literal[STATUS_NAMES]  # type: ignore[valid-type]
# An answer the simulation accepted.
VALID: str = STATUS_NAMES[VALID_CODE]
# An answer it rejected (unparsable, out of range).
INVALID: str = STATUS_NAMES[INVALID_CODE]
# An answer that came after the round's deadline.
LATE: str = STATUS_NAMES[LATE_CODE]
# No answer: the agent's worker was lost.
LOST: str = STATUS_NAMES[LOST_CODE]

# A decision row is written once and never changes status.
FINAL: tuple[str, ...] = DECISION_STATUSES
TRANSITIONS: dict[str, tuple[str, ...]] = {status: () for status in DECISION_STATUSES}
MACHINE = machine("decision", DECISION_STATUSES, TRANSITIONS, final=FINAL, initial=FINAL)
check_transition = MACHINE.check
