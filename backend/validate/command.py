"""`populace validate`: where the runs happen (a local cluster of its own, or --manager), the
output folder, the progress lines, and the exit code."""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from backend.cli_errors import unreachable
from backend.client import ApiError, Client, MissingToken
from backend.validate import report
from backend.validate.llm import LlmUnavailable, open_llm
from backend.validate.sizes import FULL, QUICK
from backend.validate.spare import SpareWorker
from backend.validate.suite import exit_code, run_suite
from worker_server.worker_states import ONLINE

EXIT_BAD_INPUT = 2
LOCAL_PROCS = 2


class BadInput(Exception):
    """One line for the user: what is wrong and how to fix it."""


def say(text: str) -> None:
    print(text, flush=True)


def prepare_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} is a file, not a folder: name a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise BadInput(
            f"--out {out} already holds files: pass --force to overwrite them, or name an "
            "empty folder"
        )
    out.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def remote_client(url: str, token: str | None) -> Iterator[tuple[Client, None]]:
    try:
        client = Client(url, token)
    except MissingToken as exc:
        raise BadInput(str(exc)) from None
    with client:
        try:
            client.info()
            online = [w for w in client.workers() if w.state == ONLINE]
        except ApiError as exc:
            if exc.status == 401:
                raise BadInput(
                    f"the manager at {url} refused the token: pass --token or set "
                    "POPULACE_API_TOKEN to its API token"
                ) from None
            raise BadInput(f"the manager at {url} answered {exc.status}: {exc.message}") from None
        except Exception as exc:
            line = unreachable(exc, url)
            if line is None:
                raise
            raise BadInput(
                f"{line}; start it (populace manager) or leave out --manager and validate "
                "starts a manager and workers of its own"
            ) from None
        if not online:
            raise BadInput(
                f"the manager at {url} has no online worker: start some "
                "(populace worker --manager ...)"
            )
        yield client, None


@contextlib.contextmanager
def local_client(procs: int) -> Iterator[tuple[Client, SpareWorker]]:
    """A manager on SQLite in a temp folder and `procs` worker processes, stopped at the end
    (bench.cluster, as the benchmarks start theirs), with a spare worker a check may kill."""
    from bench import processes
    from bench.cluster import LocalCluster

    processes.end_on_signals()
    say(f"starting a local manager (SQLite) and {procs} worker processes")
    with LocalCluster() as cluster:
        cluster.start_node(procs=procs)
        cluster.wait_online(procs)
        with Client(cluster.url, cluster.api_token) as client:
            yield client, SpareWorker(cluster, procs)


def validate(
    out: Path,
    quick: bool,
    force: bool,
    manager: str | None,
    token: str | None,
    procs: int = LOCAL_PROCS,
    only: set[str] | None = None,
    llm: str | None = None,
    model: str | None = None,
    llm_api: str | None = None,
    study: str | None = None,
    llm_server: str | None = None,
) -> int:
    started_at, started = datetime.now(UTC), time.monotonic()
    code_commit = report.commit()  # the code that runs: read before, not after, the suite
    try:
        prepare_out(out, force)
        sizes = QUICK if quick else FULL
        with contextlib.ExitStack() as stack:
            # The model first: an unreachable --llm is refused before any cluster starts.
            target = (
                stack.enter_context(open_llm(llm, model, llm_api, say, llm_server)) if llm else None
            )
            where = remote_client(manager, token) if manager else local_client(procs)
            client, spare = stack.enter_context(where)
            what = f"the {study} study" if study else f"{sizes.mode} suite"
            say(f"populace validate: {what} on {manager or 'a local cluster'}")
            results = run_suite(client, sizes, out, say, only, spare, target, study)
    except (BadInput, LlmUnavailable) as exc:
        print(f"populace validate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    code = exit_code(results)
    wall_s = time.monotonic() - started
    doc = report.document(
        results,
        command=shlex.join(["populace", "validate", *sys.argv[2:]]),
        mode=sizes.mode,
        cluster=manager or f"local: manager on SQLite, {procs} worker processes",
        started=started_at,
        wall_s=wall_s,
        code=code,
        commit=code_commit,
    )
    report.write(out, doc)
    counts = doc["summary"]
    say(f"{report.counts_text(counts)} in {wall_s:.0f} s; report: {out / 'index.html'}")
    return code
