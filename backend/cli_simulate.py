"""`populace simulate FILE` and `populace simulation ...`: run, follow, list, pause, resume,
cancel and export simulations through the REST API and the live events."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from backend.cli_population import JsonOpt, ManagerOpt, TokenOpt, _client, _fail, plain, refusals
from backend.lifecycles import simulation as lifecycle
from backend.simulations.validity import DEFAULT_PARTICIPATION_FLOOR

if TYPE_CHECKING:
    from backend.client import Client

app = typer.Typer(help="List, pause, resume, cancel and export simulations.", no_args_is_help=True)
FINAL = set(lifecycle.FINAL)
# Following a run stops here too: a paused run waits for someone to resume it.
STOPPED = FINAL | {lifecycle.PAUSED}


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


# Counts the line ends with, whatever the plugin.
COUNTS = ("n_valid", "n_invalid")


def round_line(r: dict) -> str:
    """The guessing game's mean, target and winner; another plugin's declared metrics."""
    lost = f", lost {r['n_lost']}" if r.get("n_lost") else ""
    if r.get("target") is not None or not r.get("metrics"):
        told = (
            f"mean {_number(r['mean'])}, target {_number(r['target'])}, "
            f"winner {_number(r['winner_value'])}"
        )
    else:
        told = ", ".join(
            f"{name} {_number(value)}" for name, value in r["metrics"].items() if name not in COUNTS
        )
    return (
        f"round {r['round']}: {told} (valid {r['n_valid']}, invalid {r['n_invalid']}, "
        f"late {r['n_late']}{lost}, {r['duration_s']:.2f}s)"
    )


class _RoundBars:
    """One progress bar per round on stderr, fed by round.progress; stdout keeps the results."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.bar = None
        self.round = 0
        self.shown = 0

    def progress(self, round_number: int, answered: int, total: int) -> None:
        if round_number != self.round:
            self.close()
            self.round, self.shown = round_number, 0
            self.bar = typer.progressbar(
                length=max(total, 1), label=f"round {round_number}/{self.rounds}", file=sys.stderr
            )
            self.bar.__enter__()
        if self.bar is not None and answered > self.shown:
            self.bar.update(answered - self.shown)
            self.shown = answered

    def complete(self, round_number: int) -> None:
        """The round is done: its bar ends full. Progress events are throttled, so the last
        one may say 0 % or 50 % of a round that has long finished."""
        if self.bar is not None and round_number == self.round:
            self.bar.update(self.bar.length - self.shown)
            self.shown = self.bar.length
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def _rounds(client: Client, simulation_id: int) -> list[dict]:
    return [plain(r) for r in client.rounds(simulation_id)]


def _simulation(client: Client, simulation_id: int) -> dict:
    return plain(client.simulation(simulation_id))


def follow(client: Client, simulation: dict) -> dict:
    """Print each round as it completes (from live events) until the simulation ends."""
    from websockets.exceptions import WebSocketException

    # Imported here: the CLI starts without the manager's models.
    from backend.events.catalog import RoundCompleted, RoundProgress, SimulationUpdated, parse

    followed = (RoundProgress, RoundCompleted, SimulationUpdated)

    sid = simulation["id"]
    printed: set[int] = set()
    bars = _RoundBars(simulation["rounds"])

    def show(r: dict) -> None:
        if r["round"] not in printed:
            bars.complete(r["round"])
            printed.add(r["round"])
            typer.echo(round_line(r))

    with client.events(topics=f"simulation:{sid}") as ws:
        # Subscribed first, then read what already happened: nothing falls in between.
        current = _simulation(client, sid)
        for r in _rounds(client, sid):
            show(r)
        while current["status"] not in STOPPED:
            try:
                event = parse(ws.recv(timeout=2.0), only=followed)
            except TimeoutError:
                current = _simulation(client, sid)
                continue
            except WebSocketException as exc:
                bars.close()
                _fail(f"lost the event stream: {exc}")
            payload = event.payload if event is not None else None
            if isinstance(payload, RoundProgress):
                bars.progress(payload.round, payload.answered, payload.total)
            elif isinstance(payload, RoundCompleted):
                show(payload.model_dump(mode="json"))
            elif isinstance(payload, SimulationUpdated) and payload.status in STOPPED:
                current = _simulation(client, sid)
    bars.close()
    for r in _rounds(client, sid):  # anything the events raced past
        show(r)
    return current


def simulate(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="Simulation config, YAML or JSON.")
    ],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    wait: Annotated[bool, typer.Option(help="Follow the rounds until the end.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Run a simulation from a config file, printing each round's mean and target."""
    with _client(manager, token) as client:
        with refusals(document=file):
            created = plain(client.create_simulation(file.read_bytes()))
        typer.echo(
            f"simulation {created['id']} ({created['name']}) on population "
            f"{created['population_id']}: {created['rounds']} rounds, seed {created['seed']}"
        )
        if not wait:
            return
        final = follow(client, created)
    _finish(final, as_json)


def run_summary(final: dict) -> str:
    """'simulation 4 (cli run): completed, 3 of 3 rounds played (converged)'"""
    why = final.get("stop_reason") or final.get("pause_reason") or final.get("error")
    lost = final.get("lost_agents", 0)
    below = final.get("rounds_below_floor", 0)
    return (
        f"simulation {final['id']} ({final.get('name', '')}): {final['status']}, "
        f"{final['current_round']} of {final['rounds']} rounds played"
        + (f" ({why})" if why else "")
        + (f", {lost:,} agent answers lost" if lost else "")
        + (f", {_below_floor(final)}" if below else "")
    )


def _below_floor(s: dict) -> str:
    """'2 rounds below the participation floor (80 %)'"""
    below = s["rounds_below_floor"]
    floor = s.get("participation_floor", DEFAULT_PARTICIPATION_FLOOR)
    return f"{below} round{'s' if below != 1 else ''} below the participation floor ({floor:.0%})"


def _finish(final: dict, as_json: bool = False) -> None:
    """The summary line of a followed run; a run that did not complete exits non-zero."""
    summary = {
        "id": final["id"],
        "status": final["status"],
        "rounds_played": final["current_round"],
        "stop_reason": final.get("stop_reason"),
        "error": final.get("error"),
        "pause_reason": final.get("pause_reason"),
        "lost_agents": final.get("lost_agents", 0),
        "rounds_below_floor": final.get("rounds_below_floor", 0),
    }
    typer.echo(json.dumps(summary) if as_json else run_summary(final))
    sid = final["id"]
    if final["status"] == lifecycle.PAUSED:
        _fail(
            f"simulation {sid} paused after round {final['current_round']}: "
            f"{final.get('pause_reason')}; go on with `populace simulation resume {sid}`"
        )
    if final["status"] != lifecycle.COMPLETED:
        _fail(f"simulation {sid} {final['status']}: {final.get('error') or ''}".rstrip(": "))
    if final.get("lost_agents"):
        typer.secho(
            f"populace: simulation {sid} completed over a partial population: "
            f"{final['lost_agents']} agent answers counted lost (allow_partial)",
            err=True,
            fg=typer.colors.YELLOW,
        )
    if final.get("rounds_below_floor"):
        typer.secho(
            f"populace: simulation {sid} is not whole: {_below_floor(final)}; its rounds "
            "show participation and parse failures",
            err=True,
            fg=typer.colors.YELLOW,
        )


@app.command("list")
def list_(
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    population_id: Annotated[int | None, typer.Option(help="Only this population's.")] = None,
) -> None:
    """List simulations (all pages)."""
    with _client(manager, token) as client:
        header = f"{'id':>6}  {'status':<10} {'round':>9}  {'population':>10}  name"
        for simulation in client.simulations(population_id=population_id):
            if header:  # after the first answer: a refusal prints no table header first
                typer.echo(header)
                header = ""
            s = plain(simulation)
            progress = f"{s['current_round']}/{s['rounds']}"
            typer.echo(
                f"{s['id']:>6}  {s['status']:<10} {progress:>9}  {s['population_id']:>10}  "
                f"{s['name']}{_note(s)}"
            )
        if header:  # no simulation at all: the header alone
            typer.echo(header)


def _note(s: dict) -> str:
    """Why a listed run stopped short, or what it lost, after its name."""
    notes = []
    if s["status"] == lifecycle.PAUSED:
        notes.append(f"paused: {s.get('pause_reason')}")
    elif s["status"] == lifecycle.FAILED and s.get("error"):
        notes.append(f"failed: {s['error']}")
    if s.get("lost_agents"):
        notes.append(f"{s['lost_agents']} answers lost")
    if s.get("rounds_below_floor"):
        notes.append(_below_floor(s))
    return f"  ({'; '.join(notes)})" if notes else ""


@app.command("pause")
def pause(
    simulation_id: Annotated[int, typer.Argument(help="Simulation id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Pause a running simulation; `resume` goes on after its last kept round.

    The round in flight is dropped on every worker; the rounds already played are kept."""
    with _client(manager, token) as client:
        result = plain(client.pause_simulation(simulation_id))
    reason = f" ({result['pause_reason']})" if result.get("pause_reason") else ""
    typer.echo(
        f"simulation {simulation_id}: {result['status']} after round "
        f"{result['current_round']} of {result['rounds']}{reason}"
    )


@app.command("resume")
def resume(
    simulation_id: Annotated[int, typer.Argument(help="Simulation id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    follow_rounds: Annotated[
        bool, typer.Option("--follow", help="Follow the rounds until the run ends.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Resume a paused or failed simulation from the round after its last kept one.

    LLM API keys are not given here: the workers read them from their own environment (or keys
    file) by the names the config's api_key_env gives."""
    with _client(manager, token) as client:
        result = plain(client.resume_simulation(simulation_id))
        typer.echo(
            f"simulation {simulation_id}: {result['status']} from round "
            f"{result['current_round'] + 1} of {result['rounds']}"
        )
        if not follow_rounds:
            return
        final = follow(client, result)
    _finish(final, as_json)


@app.command("cancel")
def cancel(
    simulation_id: Annotated[int, typer.Argument(help="Simulation id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Cancel a running or paused simulation: its workers stop the round in flight."""
    with _client(manager, token) as client:
        result = plain(client.cancel_simulation(simulation_id))
    typer.echo(
        f"simulation {simulation_id}: {result['status']} after round {result['current_round']}"
    )


@app.command("delete")
def delete(
    simulation_id: Annotated[int, typer.Argument(help="Simulation id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Delete a finished simulation with its rounds and every decision (cancel a live one
    first)."""
    with _client(manager, token) as client:
        client.delete_simulation(simulation_id)
    typer.echo(f"simulation {simulation_id}: deleted, with its rounds and decisions")


class _ExportProgress:
    """Bytes (and rows, for text formats) received so far, on stderr: a line redrawn at most
    a few times a second on a terminal, and one summary line at the end in any case."""

    INTERVAL_S = 0.25

    def __init__(self, simulation_id: int, fmt: str) -> None:
        self.simulation_id = simulation_id
        # Text rows end in a newline (a CSV response with line breaks counts once per break).
        self.count_rows = fmt != "parquet"
        self.header_lines = 1 if fmt == "csv" else 0
        self.bytes = 0
        self.newlines = 0
        self.live = sys.stderr.isatty()
        self.shown_at = float("-inf")  # the first chunk is shown at once

    @property
    def rows(self) -> int:
        return max(self.newlines - self.header_lines, 0)

    def _text(self) -> str:
        size = f"{self.bytes / 2**20:.1f} MiB"
        return f"{self.rows:,} rows ({size})" if self.count_rows else size

    def add(self, chunk: bytes) -> None:
        self.bytes += len(chunk)
        if self.count_rows:
            self.newlines += chunk.count(b"\n")
        now = time.monotonic()
        if self.live and now - self.shown_at >= self.INTERVAL_S:
            self.shown_at = now
            sys.stderr.write(f"\rsimulation {self.simulation_id}: {self._text()} so far")
            sys.stderr.flush()

    def finish(self, where: str, rows: int | None = None) -> None:
        if rows is not None:
            self.count_rows, self.newlines, self.header_lines = True, rows, 0
        clear = "\r\x1b[K" if self.live else ""
        sys.stderr.write(
            f"{clear}simulation {self.simulation_id}: exported {self._text()} to {where}\n"
        )
        sys.stderr.flush()


def _parquet_rows(path: Path) -> int | None:
    """The rows of a written Parquet file, from its footer (None without pyarrow)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    return pq.ParquetFile(path).metadata.num_rows


EXPORT_FORMATS = ("csv", "jsonl", "parquet")


@app.command("export")
def export(
    simulation_id: Annotated[int, typer.Argument(help="Simulation id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    format: Annotated[str, typer.Option("--format", help="csv, jsonl or parquet.")] = "csv",
    round: Annotated[int | None, typer.Option("--round", min=1, help="Only this round.")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
    attributes: Annotated[
        bool, typer.Option("--attributes", help="Add one column per agent attribute.")
    ] = False,
    persona: Annotated[bool, typer.Option("--persona", help="Add each agent's persona.")] = False,
    record: Annotated[
        Path | None,
        typer.Option("--record", help="Also write the run's reproducibility record (JSON) here."),
    ] = None,
) -> None:
    """Every decision of a simulation, streamed (round, agent_id, value, status, response, then
    the agent's attributes and persona when asked); progress goes to stderr."""
    if format not in EXPORT_FORMATS:
        _fail(f"--format must be csv, jsonl or parquet, got {format!r}")
    if format == "parquet" and output is None and sys.stdout.isatty():
        _fail("--format parquet is binary: write it to a file with --output/-o, or pipe it")
    with _client(manager, token) as client:
        if record is not None:
            run_record = client.record(simulation_id)
            record.write_text(json.dumps(run_record, indent=2, sort_keys=True) + "\n")
        with client.export_decisions(
            simulation_id, format, round=round, attributes=attributes, persona=persona
        ) as chunks:
            progress = _ExportProgress(simulation_id, format)
            sink = output.open("wb") if output is not None else sys.stdout.buffer
            try:
                for chunk in chunks:
                    sink.write(chunk)
                    progress.add(chunk)
            finally:
                if output is not None:
                    sink.close()
                else:
                    sink.flush()
    rows = _parquet_rows(output) if format == "parquet" and output is not None else None
    progress.finish(str(output) if output is not None else "stdout", rows)


@app.command("groups")
def groups(
    simulation_id: Annotated[int, typer.Argument(help="Simulation id.")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    format: Annotated[str, typer.Option("--format", help="csv or jsonl.")] = "csv",
    round: Annotated[int | None, typer.Option("--round", min=1, help="Only this round.")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
) -> None:
    """The plugin's figures per group (e.g. each clique's round of consensus), one row per group
    per round: round, group, then one column per group metric."""
    if format not in ("csv", "jsonl"):
        _fail(f"--format must be csv or jsonl, got {format!r}")
    with (
        _client(manager, token) as client,
        client.export_groups(simulation_id, format, round=round) as chunks,
    ):
        sink = output.open("wb") if output is not None else sys.stdout.buffer
        try:
            for chunk in chunks:
                sink.write(chunk)
        finally:
            if output is not None:
                sink.close()
            else:
                sink.flush()
