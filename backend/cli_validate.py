"""`populace validate`: the built-in models against known results, with a report
(backend/validate, docs/validation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from backend.cli_population import TokenOpt


def validate(
    out: Annotated[
        Path,
        typer.Option("--out", help="Folder for index.html, report.md, results.json and figures."),
    ],
    quick: Annotated[
        bool, typer.Option("--quick", help="The CI size: a few minutes on 2 cores.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Write into an --out that already holds files.")
    ] = False,
    manager: Annotated[
        str | None,
        typer.Option(
            "--manager",
            show_default=False,
            help="Run on this manager's cluster; left out, a manager (SQLite) and local "
            "workers are started and stopped.",
        ),
    ] = None,
    token: TokenOpt = None,
    procs: Annotated[
        int, typer.Option(min=1, help="Worker processes of the local cluster (without --manager).")
    ] = 2,
    check: Annotated[
        list[str] | None,
        typer.Option(
            "--check",
            help="Run only these checks (voter, sir, bounded_confidence, guess, "
            "reproducibility); repeatable.",
        ),
    ] = None,
) -> None:
    """Run the analytic checks (voter, SIR, bounded confidence, guessing game,
    reproducibility) through a manager and write a report. Exit code: 0 every check passed,
    1 one failed, 3 none failed but one could not run, 2 bad input."""
    from backend.validate.command import validate as run
    from backend.validate.suite import CHECKS

    known = {name for name, _ in CHECKS}
    if check and not set(check) <= known:
        typer.secho(
            f"populace validate: unknown --check {sorted(set(check) - known)}; "
            f"one of {', '.join(sorted(known))}",
            err=True,
        )
        raise typer.Exit(2)
    raise typer.Exit(run(out, quick, force, manager, token, procs, set(check) if check else None))
