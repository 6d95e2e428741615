"""`populace sweep ...`: run a grid of simulations from a sweep file, follow it, list, show,
cancel and delete sweeps through the REST API and the live events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import httpx
import typer

from backend.cli_population import ManagerOpt, TokenOpt, _client, _fail, plain
from backend.lifecycles import sweep as lifecycle

if TYPE_CHECKING:
    from backend.client import Client

app = typer.Typer(
    help="Sweeps: one simulation per point of a grid over config fields.", no_args_is_help=True
)
FINAL = set(lifecycle.FINAL)
PAGE = 500


@contextmanager
def _session(manager: str, token: str | None) -> Iterator[Client]:
    """The API client; a manager that cannot be reached is one line and exit 1, not a trace."""
    try:
        with _client(manager, token) as client:
            yield client
    except (httpx.TransportError, OSError) as exc:  # OSError: the event socket
        _fail(f"cannot reach the manager at {manager}: {exc}")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _params(params: dict) -> str:
    return ", ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in params.items())


def results(client: Client, sweep_id: int) -> tuple[dict, list[dict]]:
    """The sweep and every row of its results table (all pages)."""
    rows: list[dict] = []
    after = None
    while True:
        sweep = plain(client.sweep(sweep_id, after=after, limit=PAGE))
        rows += sweep["results"]["items"]
        after = sweep["results"]["next_after"]
        if after is None:
            return sweep, rows


def print_table(sweep: dict, rows: list[dict]) -> None:
    typer.echo(
        f"sweep {sweep['id']} ({sweep['name']}, {sweep['mode']}): {sweep['status']}, "
        f"{sweep['finished']}/{sweep['runs']} runs finished"
    )
    typer.echo(
        f"{'point':>5}  {'sim':>5}  {'status':<10} {'rounds':>7}  {'mean':>8}  {'target':>8}  "
        f"{'winner':>8}  {'valid':>7}  {'tokens':>8}  params"
    )
    for r in rows:
        rounds = "-" if r["rounds"] is None else f"{r['rounds_played']}/{r['rounds']}"
        tokens = (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)
        typer.echo(
            f"{r['point']:>5}  {r['simulation_id'] or '-':>5}  {r['status'] or 'waiting':<10} "
            f"{rounds:>7}  {_number(r['final_mean']):>8}  {_number(r['target']):>8}  "
            f"{_number(r['winner_value']):>8}  {r['n_valid'] if r['n_valid'] is not None else '-':>7}  "
            f"{tokens:>8}  {_params(r['params'])}"
        )
    if sweep.get("error"):
        typer.echo(f"error: {sweep['error']}")


def _status(client: Client, sweep_id: int) -> dict:
    """The sweep with the first row of its results only: its status, cheaply."""
    return plain(client.sweep(sweep_id, limit=1))


def follow(client: Client, sweep_id: int) -> dict:
    """Print each run as it ends (from the sweep's live events) until the sweep ends."""
    from websockets.exceptions import WebSocketException

    # Imported here: the CLI starts without the manager's models.
    from backend.events.catalog import SweepRun, SweepUpdated, parse

    with client.events(topics=f"sweep:{sweep_id}") as ws:
        # Subscribed first, then read the status: nothing falls in between.
        sweep = _status(client, sweep_id)
        while sweep["status"] not in FINAL:
            try:
                event = parse(ws.recv(timeout=5.0), only=(SweepRun, SweepUpdated))
            except TimeoutError:
                sweep = _status(client, sweep_id)
                continue
            except WebSocketException as exc:
                _fail(f"lost the event stream: {exc}")
            payload = event.payload if event is not None else None
            if isinstance(payload, SweepRun) and payload.status in FINAL:
                typer.echo(
                    f"point {payload.point}/{sweep['runs']}: simulation "
                    f"{payload.simulation_id} {payload.status}",
                    err=True,
                )
            elif isinstance(payload, SweepUpdated) and payload.status in FINAL:
                sweep = _status(client, sweep_id)
    return sweep


@app.command("run")
def run(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="Sweep file, YAML or JSON.")
    ],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    wait: Annotated[
        bool, typer.Option(help="Follow the runs, then print the results table.")
    ] = True,
) -> None:
    """Launch a sweep from a file; with --wait (the default), print its results table at the
    end and exit non-zero unless it completed."""
    with _session(manager, token) as client:
        created = plain(client.create_sweep(file.read_bytes()))
        typer.echo(
            f"sweep {created['id']} ({created['name']}): {created['runs']} runs, {created['mode']}"
        )
        if not wait:
            return
        follow(client, created["id"])
        sweep, rows = results(client, created["id"])
    print_table(sweep, rows)
    if sweep["status"] != lifecycle.COMPLETED:
        _fail(f"sweep {sweep['id']} {sweep['status']}: {sweep.get('error') or ''}".rstrip(": "))


@app.command("list")
def list_(manager: ManagerOpt = "http://127.0.0.1:8000", token: TokenOpt = None) -> None:
    """List sweeps (all pages)."""
    with _session(manager, token) as client:
        typer.echo(f"{'id':>6}  {'status':<10} {'mode':<9} {'runs':>5}  name")
        for s in client.sweeps(page_size=PAGE):
            typer.echo(f"{s.id:>6}  {s.status:<10} {s.mode:<9} {s.runs:>5}  {s.name}")


@app.command("show")
def show(
    sweep_id: Annotated[int, typer.Argument(help="Sweep id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """A sweep's results table: one row per point, with its run's final statistics."""
    with _session(manager, token) as client:
        sweep, rows = results(client, sweep_id)
    print_table(sweep, rows)


@app.command("cancel")
def cancel(
    sweep_id: Annotated[int, typer.Argument(help="Sweep id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Stop launching runs and cancel the live ones (finished runs keep their results)."""
    with _session(manager, token) as client:
        result = client.cancel_sweep(sweep_id)
    typer.echo(f"sweep {sweep_id}: {result.status}")


@app.command("delete")
def delete(
    sweep_id: Annotated[int, typer.Argument(help="Sweep id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Delete a finished sweep with every run's rounds and decisions."""
    with _session(manager, token) as client:
        client.delete_sweep(sweep_id)
    typer.echo(f"sweep {sweep_id}: deleted, with its runs' results")
