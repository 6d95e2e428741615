"""`populace agent ...`: talk to one agent through the REST API."""

from __future__ import annotations

import json
from typing import Annotated

import httpx
import typer

from backend.cli_population import ManagerOpt, TokenOpt, _client, _fail
from backend.lifecycles.interview import ANSWERED

app = typer.Typer(help="Interview agents about their runs.", no_args_is_help=True)


@app.command("interview")
def interview(
    agent_id: Annotated[int, typer.Argument(help="The agent's id.")],
    question: Annotated[str, typer.Argument(help="What to ask it.")],
    simulation: Annotated[
        int, typer.Option("--simulation", "-s", help="The run it answers about.")
    ],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Ask an agent a question about a run; its answer is printed as it streams in."""
    with _client(manager, token) as client:
        try:
            with client.interview(agent_id, simulation, question) as lines:
                done = _print_stream(lines)
        except httpx.HTTPError as exc:
            _fail(f"the interview broke off: {exc}")
    if done is None:
        _fail("the manager ended the answer without its last line")
    if done["status"] != ANSWERED:
        _fail(f"interview {done['id']} failed: {done.get('error') or 'no reason given'}")


def _print_stream(lines) -> dict | None:
    """Print the deltas as they come; the stored interview from the last line."""
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        if event["type"] == "delta":
            typer.echo(event["text"], nl=False)
        elif event["type"] == "done":
            typer.echo("")
            return event["interview"]
        else:
            typer.echo("")
            _fail(event.get("detail") or "the interview failed")
    return None
