"""`populace validate`: the built-in models against known results, with a report
(backend/validate, docs/validation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from backend.cli_population import TokenOpt

ManagerOpt = Annotated[
    str | None,
    typer.Option(
        "--manager",
        show_default=False,
        help="Run on this manager's cluster; left out, a manager (SQLite) and local "
        "workers are started and stopped.",
    ),
]
CheckOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--check",
        help="Run only these checks (voter, sir, bounded_confidence, guess, "
        "reproducibility; with --llm also llm_games, llm_guess); repeatable.",
    ),
]
LlmOpt = Annotated[
    str | None,
    typer.Option(
        "--llm",
        show_default=False,
        help="Also play the LLM reference games with this OpenAI-compatible endpoint "
        "(BASE_URL, with --model), or 'local' for Gemma 3 270M on llama.cpp.",
    ),
]
StudyOpt = Annotated[
    str | None,
    typer.Option(
        "--study",
        show_default=False,
        help="Play a paper's own study instead of the suite: agentscope (the AgentScope "
        "large-scale paper's guessing-game figures; --llm local unless --llm is given).",
    ),
]
LlmApiOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-api",
        show_default=False,
        help="completions (base models) or chat; default completions with --llm local, "
        "chat otherwise.",
    ),
]


LlmServerOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-server",
        show_default=False,
        help="What serves --llm BASE_URL: llama_cpp, vllm or openai (the default). With "
        "llama_cpp or vllm the answers are constrained to the game's numbers (a grammar, a "
        "regex), as in a simulation's endpoint.",
    ),
]


def _refuse(text: str) -> NoReturn:
    """Bad input: the message on stderr and exit code 2."""
    typer.secho(f"populace validate: {text}", err=True)
    raise typer.Exit(2)


def _check_options(
    check: list[str] | None,
    llm: str | None,
    model: str | None,
    llm_api: str | None,
    study: str | None,
    llm_server: str | None = None,
) -> None:
    """Refuse option combinations that cannot run, before any cluster starts."""
    from backend.validate.suite import CHECKS, LLM_CHECKS, STUDIES
    from worker_server.llm.endpoint_rules import SERVERS

    known = {name for name, _ in CHECKS}
    llm_names = {name for name, _ in LLM_CHECKS}
    if check and not set(check) <= known | llm_names:
        unknown = sorted(set(check) - known - llm_names)
        _refuse(f"unknown --check {unknown}; one of {', '.join(sorted(known | llm_names))}")
    if check and set(check) & llm_names and llm is None:
        _refuse(
            f"--check {', '.join(sorted(set(check) & llm_names))} needs --llm (a base URL or local)"
        )
    if llm_api not in (None, "completions", "chat"):
        _refuse(f"--llm-api {llm_api}: one of completions, chat")
    if llm_server is not None and llm_server not in SERVERS:
        _refuse(f"--llm-server {llm_server}: one of {', '.join(SERVERS)}")
    if (model or llm_api or llm_server) and llm is None:
        _refuse("--model, --llm-api and --llm-server go with --llm")
    if study is not None:
        if study not in STUDIES:
            _refuse(f"unknown --study {study}; one of {', '.join(sorted(STUDIES))}")
        if check:
            _refuse("--study plays the study's own runs: leave out --check")


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
    manager: ManagerOpt = None,
    token: TokenOpt = None,
    procs: Annotated[
        int, typer.Option(min=1, help="Worker processes of the local cluster (without --manager).")
    ] = 2,
    check: CheckOpt = None,
    llm: LlmOpt = None,
    model: Annotated[
        str | None,
        typer.Option("--model", show_default=False, help="The model --llm BASE_URL serves."),
    ] = None,
    study: StudyOpt = None,
    llm_api: LlmApiOpt = None,
    llm_server: LlmServerOpt = None,
) -> None:
    """Run the analytic checks (voter, SIR, bounded confidence, guessing game,
    reproducibility) through a manager and write a report; with --llm, also the LLM reference
    games beside GAMA-Bench's published rows. Exit code: 0 every check passed, 1 one failed,
    3 none failed but one could not run, 2 bad input."""
    from backend.validate.command import validate as run
    from backend.validate.llm import LOCAL

    _check_options(check, llm, model, llm_api, study, llm_server)
    if study is not None:
        llm = llm or LOCAL
    only = set(check) if check else None
    raise typer.Exit(
        run(
            out,
            quick,
            force,
            manager,
            token,
            procs,
            only,
            llm=llm,
            model=model,
            llm_api=llm_api,
            llm_server=llm_server,
            study=study,
        )
    )
