"""The suite: every check in order on one cluster, each one's verdict printed as it ends, and
the report written at the end (report.py)."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path

from backend.client import ApiError, Client
from backend.validate import figures
from backend.validate.checks import (
    agentscope,
    guess,
    hegselmann_krause,
    llm_games,
    llm_guess,
    reproducibility,
    sir,
    voter,
)
from backend.validate.context import Context
from backend.validate.llm import LlmTarget
from backend.validate.result import FAIL, NOT_RUN, PASS, CheckResult
from backend.validate.runs import RunFailed, Runs
from backend.validate.sizes import Sizes
from backend.validate.spare import SpareWorker

# (name, module): a new check is one more entry.
CHECKS = (
    ("voter", voter),
    ("sir", sir),
    ("bounded_confidence", hegselmann_krause),
    ("guess", guess),
    ("reproducibility", reproducibility),
)
# With --llm: the reference games, played by that model.
LLM_CHECKS = (
    ("llm_games", llm_games),
    ("llm_guess", llm_guess),
)
# --study NAME: a paper's own study, in place of the suite (with an LLM).
STUDIES = {"agentscope": (("agentscope", agentscope),)}

# Exit codes: every check passed; one failed; none failed but one could not run.
EXIT_PASSED, EXIT_FAILED, EXIT_NOT_RUN = 0, 1, 3


def exit_code(results: list[CheckResult]) -> int:
    verdicts = {r.verdict for r in results}
    if FAIL in verdicts:
        return EXIT_FAILED
    if NOT_RUN in verdicts:
        return EXIT_NOT_RUN
    return EXIT_PASSED


def installed_plugins(client: Client) -> set[str]:
    names, after = set(), None
    while True:
        page = client.plugins_page(after=after)
        names |= {p.name for p in page.items}
        after = page.next_after
        if after is None:
            return names


def line(result: CheckResult) -> str:
    """One line per check: verdict, name, target, measured, tolerance (and why)."""

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.4g}"

    text = (
        f"{result.verdict.upper():<7} {result.name:<28} target {number(result.target):>8}  "
        f"measured {number(result.measured):>8}  tolerance {result.tolerance}"
    )
    return f"{text}  ({result.reason})" if result.reason else text


def run_suite(
    client: Client,
    sizes: Sizes,
    out: Path,
    say: Callable[[str], None],
    only: set[str] | None = None,
    spare: SpareWorker | None = None,
    llm: LlmTarget | None = None,
    study: str | None = None,
) -> list[CheckResult]:
    runs = Runs(client)
    context = Context(runs, sizes, out, say, installed_plugins(client), spare, llm)
    results: list[CheckResult] = []
    if study is not None:
        checks = STUDIES[study]
    else:
        checks = CHECKS + (LLM_CHECKS if llm is not None else ())
    try:
        for name, module in checks:
            if only is not None and name not in only:
                continue
            say(f"{name}:")
            started = time.monotonic()
            try:
                found = module.run(context)
            except (RunFailed, ApiError) as exc:
                found = [_broken(name, str(exc), started)]
            except Exception as exc:  # a bug in a check must not hide the others' results
                say(traceback.format_exc())
                found = [_broken(name, f"{type(exc).__name__}: {exc}", started)]
            finally:
                runs.cleanup()  # a check's populations free the workers for the next check
            for result in found:
                say("  " + line(result))
            results += found
    finally:
        runs.cleanup()
    played = [r for r in results if r.name.startswith("llm.") and r.details.get("by_round")]
    if played:
        figure = figures.llm_games(out, played)
        for result in played:
            result.figure = figure
    return results


def _broken(name: str, reason: str, started: float) -> CheckResult:
    return CheckResult(
        f"{name}.run",
        f"{name}: the runs did not complete",
        None,
        None,
        "-",
        FAIL,
        reason=reason,
        seconds=time.monotonic() - started,
    )


__all__ = ["CHECKS", "LLM_CHECKS", "PASS", "STUDIES", "exit_code", "line", "run_suite"]
