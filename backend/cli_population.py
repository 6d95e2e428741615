"""`populace population ...`: deploy, list, repair and delete populations through the REST API."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from backend.cli_errors import validation_lines
from backend.lifecycles import population as lifecycle

if TYPE_CHECKING:  # imported when a command calls the API: `populace worker` stays light
    from pydantic import BaseModel

    from backend.client import ApiError, Client
    from backend.events.catalog import PopulationProgress

app = typer.Typer(help="Deploy, list, repair and delete populations.", no_args_is_help=True)

ManagerOpt = Annotated[
    str, typer.Option("--manager", envvar="POPULACE_MANAGER_URL", help="Manager URL.")
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="POPULACE_API_TOKEN",
        show_default=False,
        help="API token (default: POPULACE_DATA_DIR/api_token).",
    ),
]
# The progress stages after which the follower reads the status again: a deploy's or a
# delete's end, and a delete's start.
FINAL = {lifecycle.DEPLOYED, lifecycle.DEGRADED, lifecycle.FAILED, lifecycle.DELETED}
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the result as one JSON object instead of a summary.")
]


def _fail(message: str) -> None:
    typer.secho(f"populace: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(1)


@contextmanager
def _client(manager: str, token: str | None) -> Iterator[Client]:
    """The API client (backend.client); a refusal exits 1 with the manager's reason."""
    from backend.client import Client, MissingToken, stored_token

    _warn_if_token_on_command_line()
    if token is None:
        try:
            token = stored_token()
        except MissingToken as exc:
            _fail(str(exc))
    with refusals(), Client(manager, token) as client:
        yield client


@contextmanager
def refusals(document: Path | None = None) -> Iterator[None]:
    """Exit 1 with the manager's reason when it refuses a request. A 422 about a config file
    (`document`) names the line of each field: `file.yaml:12: rounds: ...`."""
    from backend.client import ApiError

    try:
        yield
    except ApiError as exc:
        _refused(exc, document)


def _refused(exc: ApiError, document: Path | None) -> None:
    where = f"{exc.method} {exc.path} -> {exc.status}"
    if exc.is_validation and document is not None:
        text = document.read_text(errors="replace")
        lines = validation_lines(str(document), text, exc.detail)
        _fail("\n".join([f"{where}: {document} is not a valid config:", *lines]))
    _fail(f"{where}: {exc.message}")


def plain(model: BaseModel) -> dict:
    """An answer as the JSON the manager sent (the CLI prints from dicts)."""
    return model.model_dump(mode="json")


def _warn_if_token_on_command_line() -> None:
    import click
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.get_parameter_source("token") == ParameterSource.COMMANDLINE:
        typer.secho(
            "populace: warning: --token is visible in the process list (ps); prefer "
            "POPULACE_API_TOKEN or POPULACE_DATA_DIR/api_token",
            err=True,
            fg=typer.colors.YELLOW,
        )


def _status(client: Client, population_id: int) -> dict:
    """The population's list entry: cheap, unlike the detail (which counts agents per worker)."""
    population = client.population_status(population_id)
    if population is None:
        _fail(f"population {population_id} not found")
    return plain(population)


def hosting(population: dict) -> str:
    """'1000/1000': agents live workers host, of the population's size."""
    return f"{population.get('hosted', 0)}/{population['size']}"


def _follow(client: Client, population_id: int, until: set[str], label: str) -> dict:
    """A progress bar fed by the population's live events until it reaches a final state."""
    from websockets.exceptions import WebSocketException

    # Imported here: the CLI starts without the manager's models.
    from backend.events.catalog import PopulationProgress, deploy_percent, parse

    events = client.events(topics=f"population:{population_id}")
    with typer.progressbar(length=100, label=label, file=sys.stderr) as bar, events as ws:
        shown = 0
        # Subscribed first, then read the status: no event between the two is lost. After
        # that the status is read again only when the events go quiet or name a final stage.
        population = _status(client, population_id)
        while population["status"] not in until:
            try:
                event = ws.recv(timeout=1.0)
            except TimeoutError:
                population = _status(client, population_id)
                continue
            except WebSocketException as exc:
                _fail(f"lost the event stream: {exc}")
            progress = parse(event, only=(PopulationProgress,))
            if progress is None:
                continue
            stage = progress.payload.stage
            if stage in FINAL or stage == lifecycle.DELETING:
                population = _status(client, population_id)
            percent = deploy_percent(stage, progress.payload.done, progress.payload.total)
            if percent is not None and percent > shown:
                bar.update(min(percent, 99) - shown)
                shown = min(percent, 99)
        if population["status"] != lifecycle.FAILED:
            bar.update(100 - shown)  # done: the bar ends full, like the dashboard's
        return population


@app.command("create")
def create(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="Population config, YAML or JSON.")
    ],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    wait: Annotated[bool, typer.Option(help="Wait until deployed, with a progress bar.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Deploy a population from a config file."""
    with _client(manager, token) as client:
        with refusals(document=file):
            created = client.create_population(file.read_bytes())
        typer.echo(f"population {created.id} ({created.name}, {created.size} agents): deploying")
        if not wait:
            return
        final = _follow(
            client,
            created.id,
            {lifecycle.DEPLOYED, lifecycle.DEGRADED, lifecycle.FAILED},
            lifecycle.DEPLOYING,
        )
    if final["status"] == lifecycle.FAILED:
        _fail(f"population {final['id']} failed: {final.get('error')}")
    if final["status"] == lifecycle.DEGRADED:  # a worker went away right after the deploy
        typer.secho(
            f"populace: population {final['id']} is degraded: {final['hosted']} of "
            f"{final['size']} agents hosted (see `populace population repair`)"
            + (f": {final['error']}" if final.get("error") else ""),
            err=True,
            fg=typer.colors.YELLOW,
        )
    if as_json:
        typer.echo(
            json.dumps({"id": final["id"], "status": final["status"], "counts": final["counts"]})
        )
    else:
        typer.echo(deploy_summary(final))


def deploy_summary(population: dict) -> str:
    """'population 3 (education-study): deployed, 1,000 of 1,000 agents hosted; education:
    bachelor 400, doctorate 200, ...'"""
    counts = "; ".join(
        f"{name}: " + ", ".join(f"{category} {n:,}" for category, n in categories.items())
        for name, categories in (population.get("counts") or {}).items()
    )
    hosted = f"{population.get('hosted', 0):,} of {population['size']:,} agents hosted"
    if population.get("dedicated_process"):
        hosted += ", a worker process each"
    return (
        f"population {population['id']} ({population['name']}): {population['status']}, "
        f"{hosted}" + (f"; {counts}" if counts else "")
    )


@app.command("list")
def list_(
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    include_deleted: Annotated[bool, typer.Option(help="Also show deleted populations.")] = False,
) -> None:
    """List populations (all pages)."""
    with _client(manager, token) as client:
        header = f"{'id':>6}  {'status':<10} {'hosted/size':>17}  name"
        for population in client.populations(include_deleted=include_deleted):
            if header:  # after the first answer: a refusal prints no table header first
                typer.echo(header)
                header = ""
            p = plain(population)
            typer.echo(f"{p['id']:>6}  {p['status']:<10} {hosting(p):>17}  {p['name']}")
        if header:  # no population at all: the header alone
            typer.echo(header)


def _repair_report(ws, wait_s: float) -> PopulationProgress | None:
    """The `repaired` event of the repair just made, if one comes within wait_s (a repair that
    changed nothing publishes none)."""
    import time

    from backend.events.catalog import PopulationProgress, parse

    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            event = parse(ws.recv(timeout=left), only=(PopulationProgress,))
        except TimeoutError:
            return None
        if event is not None and event.payload.stage == "repaired":
            return event.payload
    return None


@app.command("repair")
def repair(
    population_id: Annotated[int, typer.Argument(help="Population id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Host every agent of a population again, now.

    Restores what live workers lost and re-places the agents of offline or removed workers onto
    online workers with room. Exits 1 when the population is still degraded afterwards (no
    worker had room for every agent)."""
    with _client(manager, token) as client:
        before = _status(client, population_id)
        # Subscribed before the repair, so its `repaired` event (the counts) cannot be missed.
        with client.events(topics=f"population:{population_id}") as ws:
            ws.recv(timeout=10)  # hello
            after = plain(client.repair_population(population_id))
            changed = (after["status"], after.get("hosted")) != (
                before["status"],
                before.get("hosted"),
            )
            report = _repair_report(ws, wait_s=10.0 if changed else 1.0)
    line = f"population {population_id}: {after['status']}, {after['hosted']} of {after['size']} agents hosted"
    if report is not None:
        line += (
            f" (restored {report.restored or 0}, re-placed {report.replaced or 0}, "
            f"no room for {report.unplaced or 0})"
        )
    typer.echo(line)
    if after["status"] == lifecycle.DEGRADED:
        _fail(
            f"population {population_id} is still degraded: no online worker has room for "
            f"{after['size'] - after['hosted']} of its agents; add workers and repair again"
        )


@app.command("delete")
def delete(
    population_id: Annotated[int, typer.Argument(help="Population id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Delete a population: its agents leave the workers and its rows leave the store."""
    with _client(manager, token) as client:
        client.delete_population(population_id)
        final = _follow(
            client, population_id, {lifecycle.DELETED, lifecycle.FAILED}, lifecycle.DELETING
        )
        left = client.agents_page(population_id=population_id, limit=1)
    typer.echo(f"population {population_id}: {final['status']}, {len(left.items)} agent rows left")
