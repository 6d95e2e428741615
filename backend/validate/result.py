"""One check's outcome: what was expected, what was measured, how close is close enough."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, NOT_RUN = "pass", "fail", "not run"
# An LLM game: what the model did, beside published rows; not judged against other models.
REPORTED = "reported"
VERDICTS = (PASS, FAIL, NOT_RUN, REPORTED)


@dataclass
class CheckResult:
    name: str  # e.g. "voter.exit_probability"
    title: str  # one line for people
    target: float | None
    measured: float | None
    tolerance: str  # how close counts, in words and numbers ("± 0.031 (3 SE)")
    verdict: str  # one of VERDICTS
    reason: str = ""  # why a check did not run, or failed to
    how: str = ""  # how the reference was computed (the report says it)
    sizes: dict[str, Any] = field(default_factory=dict)  # agents, runs, rounds ...
    details: dict[str, Any] = field(default_factory=dict)  # every other number
    figure: str | None = None  # file name in the report's folder
    finding: str = ""  # what was seen, in plain words (the LLM games)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def within(measured: float, target: float, tolerance: float) -> str:
    return PASS if abs(measured - target) <= tolerance else FAIL


def not_run(name: str, title: str, reason: str, **kwargs: Any) -> CheckResult:
    return CheckResult(name, title, None, None, "-", NOT_RUN, reason=reason, **kwargs)
