"""The `populace` command. Imports stay inside each command so `populace worker` runs on a node
that installed only the worker extra (no FastAPI, no SQLAlchemy)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from backend.cli_agent import app as agent_app
from backend.cli_errors import unreachable
from backend.cli_plugins import app as plugins_app
from backend.cli_population import app as population_app
from backend.cli_simulate import app as simulation_app
from backend.cli_simulate import simulate
from backend.cli_sweep import app as sweep_app
from backend.cli_validate import validate

app = typer.Typer(
    help="populace: run very large LLM multi-agent simulations.\n\n"
    "Start a manager (`populace manager`), point workers at it (`populace worker`), "
    "or try everything on one machine with `populace demo`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals can hold tokens
)
db_app = typer.Typer(help="Database schema migrations (Alembic).", no_args_is_help=True)
app.add_typer(db_app, name="db")
bench_app = typer.Typer(
    help="Benchmarks against real processes; each prints one JSON line (see BENCHMARKS.md).",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")
app.add_typer(population_app, name="population")
app.add_typer(agent_app, name="agent")
app.add_typer(simulation_app, name="simulation")
app.command("simulate")(simulate)
app.add_typer(sweep_app, name="sweep")
app.add_typer(plugins_app, name="plugins")
app.command("validate")(validate)
llm_app = typer.Typer(help="LLM servers for the workers to call.", no_args_is_help=True)
app.add_typer(llm_app, name="llm")
tokens_app = typer.Typer(help="Tokens of the manager's HTTP API.", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")
certs_app = typer.Typer(
    help="TLS certificates for the manager and the workers.", no_args_is_help=True
)
app.add_typer(certs_app, name="certs")


# Benchmarks that need Postgres make a scratch database of their own on this server.
DatabaseAdminUrlOpt = Annotated[
    str,
    typer.Option(
        envvar="POPULACE_TEST_PG_ADMIN_URL", help="Postgres to create a scratch database on."
    ),
]
DEFAULT_DATABASE_ADMIN_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"

TLS_CERT_OPTION = typer.Option(
    help="PEM certificate: serve TLS only (see `populace certs init`).", show_default=False
)
TLS_KEY_OPTION = typer.Option(help="PEM private key of --tls-cert.", show_default=False)
LogFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--log-format",
        envvar="POPULACE_LOG_FORMAT",
        help="text, or json: one JSON object per log line (time, level, logger, message, role, "
        "pid, exception).",
        show_default=False,
    ),
]


def _fail(message: str, code: int = 2) -> None:
    typer.secho(f"populace: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


def _settings(settings_class, what: str, **overrides):
    """Build a settings object from the options given (None: leave it to env and defaults);
    a validation error becomes one CLI message naming each field."""
    from pydantic import ValidationError

    try:
        return settings_class(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        _fail(f"invalid {what} settings: {errors}")


def _manager_settings(**overrides):
    from backend.settings import ManagerSettings

    return _settings(ManagerSettings, "manager", **overrides)


def _warn(text: str) -> None:
    """A warning on stderr, in yellow: the command goes on."""
    typer.secho(f"populace: warning: {text}", err=True, fg=typer.colors.YELLOW)


@app.command()
def manager(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port for the API and dashboard.")] = 8000,
    tls_cert: Annotated[Path | None, TLS_CERT_OPTION] = None,
    tls_key: Annotated[Path | None, TLS_KEY_OPTION] = None,
    tls_ca: Annotated[
        Path | None,
        typer.Option(help="CA that workers' gRPC certificates are checked against (TLS workers)."),
    ] = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Run the manager: REST API, websocket events and the dashboard.

    The database comes from POPULACE_DATABASE_URL (default: SQLite in ./populace.db) and is
    upgraded to the latest schema at start. Tokens come from POPULACE_API_TOKEN and
    POPULACE_JOIN_TOKEN, or are generated into POPULACE_DATA_DIR (default ./.populace).
    """
    from backend.app import create_app
    from backend.logs import configure_logging, uvicorn_log_config
    from backend.serve import serve_manager
    from backend.tokens import ensure_tokens
    from worker_server.settings import is_loopback

    settings = ensure_tokens(
        _manager_settings(
            host=host,
            port=port,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
            log_format=log_format,
        )
    )
    configure_logging(settings.log_level, settings.log_format, role="manager")
    scheme = "https" if settings.tls_cert else "http"
    typer.echo(
        f"populace manager on {scheme}://{host}:{port}  (database: {settings.database_kind}, "
        f"tokens in {settings.data_dir}/ unless set in the environment)"
    )
    if settings.tls_cert is None and not is_loopback(host):
        _warn(
            f"serving plain HTTP on {host}: tokens cross the network in clear; give "
            "--tls-cert and --tls-key (see `populace certs init`)"
        )
    # Stopped (SIGTERM, SIGINT) it writes nothing more and exits within
    # POPULACE_SHUTDOWN_TIMEOUT_S (backend.shutdown); a second manager on the same database
    # waits for the first one's lease before it opens its port (backend.db.lease).
    status = serve_manager(
        create_app(settings),
        host=host,
        port=port,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
        log_level=settings.log_level,
        access_log=False,
        log_config=uvicorn_log_config(settings.log_format),  # redacts tokens (defence in depth)
        timeout_keep_alive=int(settings.http_keep_alive_s),
    )
    if status:
        raise typer.Exit(status)


# `populace worker`'s options (those with more to say than a line).
JoinTokenOpt = Annotated[
    str | None,
    typer.Option(
        envvar="POPULACE_JOIN_TOKEN",
        help="The manager's join token (see its data dir). Prefer POPULACE_JOIN_TOKEN or "
        "--join-token-file: a command line is visible to every user in the process list.",
        show_default=False,
    ),
]
JoinTokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        envvar="POPULACE_JOIN_TOKEN_FILE",
        help="Read the join token from this file (e.g. the manager's DATA_DIR/join_token).",
        show_default=False,
    ),
]
AdvertiseHostOpt = Annotated[
    str | None,
    typer.Option(
        help="Host the manager should dial (default: --host, or the hostname when listening on all interfaces)."
    ),
]
NodeNameOpt = Annotated[
    str | None,
    typer.Option(
        help="This node's stable name (default: the hostname). A worker is (node, process "
        "index): a restarted process comes back as the same worker and gets its agents back."
    ),
]
LabelsOpt = Annotated[
    str | None,
    typer.Option(
        envvar="POPULACE_LABELS",
        help="This node's labels, name=value,... (e.g. zone=a,gpu=a100): a population's "
        "placement.node_selector puts its agents only on workers carrying them.",
        show_default=False,
    ),
]
ManagerCaOpt = Annotated[
    Path | None,
    typer.Option(help="CA that the manager's HTTPS certificate is checked against."),
]
GrpcReflectionOpt = Annotated[
    bool | None,
    typer.Option(
        "--grpc-reflection/--no-grpc-reflection",
        help="Serve gRPC reflection (authenticated like every call; off by default).",
    ),
]
LlmAllowedHostsOpt = Annotated[
    str | None,
    typer.Option(
        envvar="POPULACE_LLM_ALLOWED_HOSTS",
        help="LLM hosts the workers may call (and send API keys to): comma-separated host "
        "or host:port. Default: any.",
        show_default=False,
    ),
]
LlmKeysFileOpt = Annotated[
    Path | None,
    typer.Option(
        envvar="POPULACE_LLM_KEYS_FILE",
        help="NAME=VALUE file of LLM API keys, looked up by an endpoint's api_key_env "
        "before the environment is.",
        show_default=False,
    ),
]
MetricsPortOpt = Annotated[
    int,
    typer.Option(
        envvar="POPULACE_METRICS_PORT",
        help="First Prometheus /metrics port; process i serves on metrics-port+i. 0: none.",
    ),
]
MetricsHostOpt = Annotated[
    str | None,
    typer.Option(
        envvar="POPULACE_METRICS_HOST",
        help="Interface /metrics listens on (default: --host). Unauthenticated: see README.",
        show_default=False,
    ),
]


@app.command()
def worker(
    ctx: typer.Context,
    manager: Annotated[
        str,
        typer.Option(envvar="POPULACE_MANAGER_URL", help="Manager URL, e.g. http://10.0.0.1:8000."),
    ],
    join_token: JoinTokenOpt = None,
    join_token_file: JoinTokenFileOpt = None,
    host: Annotated[str, typer.Option(help="Interface the gRPC servers listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="First gRPC port; process i uses port+i. 0 picks free ports.")
    ] = 0,
    procs: Annotated[
        int | None, typer.Option(help="Worker processes on this node (default: one per core).")
    ] = None,
    advertise_host: AdvertiseHostOpt = None,
    node: NodeNameOpt = None,
    labels: LabelsOpt = None,
    tls_cert: Annotated[Path | None, TLS_CERT_OPTION] = None,
    tls_key: Annotated[Path | None, TLS_KEY_OPTION] = None,
    tls_ca: ManagerCaOpt = None,
    grpc_reflection: GrpcReflectionOpt = None,
    llm_allowed_hosts: LlmAllowedHostsOpt = None,
    llm_keys_file: LlmKeysFileOpt = None,
    metrics_port: MetricsPortOpt = 0,
    metrics_host: MetricsHostOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Run worker processes on this node; each serves gRPC and registers with the manager."""
    from backend.logs import configure_logging
    from worker_server.node import run_node
    from worker_server.settings import WorkerSettings

    settings = _settings(
        WorkerSettings,
        "worker",
        manager_url=manager,
        join_token=_join_token(ctx, join_token, join_token_file),
        host=host,
        port=port,
        procs=procs,
        advertise_host=advertise_host,
        node=node,
        labels=labels,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_ca=tls_ca,
        grpc_reflection=grpc_reflection,
        llm_allowed_hosts=llm_allowed_hosts,
        llm_keys_file=llm_keys_file,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        log_format=log_format,
    )
    configure_logging(settings.log_level, settings.log_format, role="node")
    raise typer.Exit(run_node(settings))


def _join_token(ctx: typer.Context, given: str | None, path: Path | None) -> str:
    """The join token from --join-token, --join-token-file or POPULACE_JOIN_TOKEN (in that order).
    The node passes it to its processes in their environment only (worker_server.node)."""
    # By name: typer vendors its own click, whose enum is not click's.
    source = ctx.get_parameter_source("join_token")
    on_command_line = source is not None and source.name == "COMMANDLINE"
    if on_command_line and path is not None:
        _fail("give the join token once: --join-token or --join-token-file, not both")
    if on_command_line:
        _warn(
            "--join-token is visible in the process list (ps); prefer --join-token-file or "
            "POPULACE_JOIN_TOKEN"
        )
        return given
    if path is not None:
        try:
            token = path.read_text().strip()
        except OSError as exc:
            _fail(f"cannot read --join-token-file {path}: {exc.strerror or exc}")
        if not token:
            _fail(f"--join-token-file {path} is empty")
        return token
    if not given:
        _fail(
            "no join token: pass --join-token-file PATH or set POPULACE_JOIN_TOKEN "
            "(the manager's DATA_DIR/join_token)"
        )
    return given


@app.command()
def demo(
    port: Annotated[int, typer.Option(help="HTTP port of the manager.")] = 8000,
    procs: Annotated[int, typer.Option(help="Local worker processes.")] = 2,
    log_format: LogFormatOpt = None,
) -> None:
    """Run a manager on SQLite and local workers; Ctrl-C stops everything."""
    import os

    from backend.demo import run_demo

    if log_format is not None:
        if log_format not in ("text", "json"):
            _fail(f"--log-format must be text or json, got {log_format!r}")
        os.environ["POPULACE_LOG_FORMAT"] = log_format  # the manager and workers it starts

    raise typer.Exit(run_demo(port=port, procs=procs))


@certs_app.command("init")
def certs_init(
    directory: Annotated[
        Path, typer.Option("--dir", help="Where to write the CA, certificates and keys.")
    ] = Path("certs"),
    host: Annotated[
        list[str] | None,
        typer.Option(
            help="A name or IP the manager or a worker is dialled at (repeat for each); "
            "localhost and the loopback addresses are always included."
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace certificates already there.")] = False,
) -> None:
    """Make a private CA and certificates for a small cluster, to turn TLS on in one step."""
    from backend.certs import init_cluster_certs

    try:
        certs = init_cluster_certs(directory, host or [], overwrite=force)
    except (FileExistsError, ValueError) as exc:
        _fail(str(exc))
    d = certs.directory
    typer.echo(
        f"Wrote a CA and certificates to {d}/ (keys are 0600; keep ca-key.pem safe).\n"
        f"  populace manager --tls-cert {d}/manager.pem --tls-key {d}/manager-key.pem "
        f"--tls-ca {d}/ca.pem ...\n"
        f"  populace worker --manager https://HOST:8000 --tls-cert {d}/worker.pem "
        f"--tls-key {d}/worker-key.pem --tls-ca {d}/ca.pem ...\n"
        f"  CLI and scripts: POPULACE_TLS_CA={d}/ca.pem"
    )


@tokens_app.command("viewer")
def tokens_viewer() -> None:
    """Print the read-only viewer token, creating it in POPULACE_DATA_DIR (mode 0600) the
    first time. It reads every GET route and the websocket; anything else is refused (403).
    A running manager picks a new one up when restarted."""
    from backend.tokens import viewer_token

    _print_token("viewer", viewer_token)


@tokens_app.command("metrics")
def tokens_metrics() -> None:
    """Print the metrics token, creating it in POPULACE_DATA_DIR (mode 0600) the first time. It
    reads GET /api/metrics only (give it to Prometheus as a credentials_file). A running
    manager picks a new one up when restarted."""
    from backend.tokens import metrics_token

    _print_token("metrics", metrics_token)


def _print_token(kind: str, read_or_create) -> None:
    """The token on stdout; where it came from on stderr, so `$(populace tokens …)` is clean."""
    token, path, created = read_or_create(_manager_settings())
    if path is None:
        typer.echo(f"(from POPULACE_{kind.upper()}_TOKEN)", err=True)
    elif created:
        typer.echo(
            f"Generated a new {kind} token (stored in {path}); restart the manager to use it.",
            err=True,
        )
    typer.echo(token)


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Upgrade the schema of POPULACE_DATABASE_URL (the manager also does this at start)."""
    from backend.db.migrate import current, upgrade

    settings = _manager_settings()
    upgrade(settings.database_url, revision)
    typer.echo(f"{settings.database_kind} schema at revision {current(settings.database_url)}")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision; 'base' drops every table.")],
) -> None:
    """Downgrade the schema of POPULACE_DATABASE_URL."""
    from backend.db.migrate import current, downgrade

    settings = _manager_settings()
    downgrade(settings.database_url, revision)
    typer.echo(
        f"{settings.database_kind} schema at revision {current(settings.database_url) or 'base'}"
    )


@bench_app.callback()
def bench_processes() -> None:
    try:
        from bench.processes import end_on_signals
    except ModuleNotFoundError as exc:
        if exc.name != "bench" and not (exc.name or "").startswith("bench."):
            raise
        # The benchmarks ship apart from the product (bench/pyproject.toml).
        _fail(
            "populace bench: the benchmarks are not installed; in a checkout: "
            "pip install -e ./bench (make install does)"
        )
    # Whatever a benchmark starts, SIGTERM or SIGINT ends it too (bench.processes).
    end_on_signals()


@bench_app.command("graph")
def bench_graph(
    kind: Annotated[
        str, typer.Option(help="erdos_renyi, watts_strogatz, barabasi_albert, cliques, edge_list.")
    ] = "erdos_renyi",
    agents: Annotated[int, typer.Option(min=100, help="Agents (graph nodes).")] = 1_000_000,
    seed: Annotated[int, typer.Option(help="Graph seed.")] = 7,
) -> None:
    """A population graph: generate (or parse), write, read back, degree stats, cut fraction."""
    import json

    from bench.graph import KINDS, run

    if kind not in KINDS:
        raise typer.BadParameter(f"one of {', '.join(KINDS)}", param_hint="--kind")
    typer.echo(json.dumps(run(kind=kind, agents=agents, seed=seed)))


@bench_app.command("liveness")
def bench_liveness(
    kills: Annotated[int, typer.Option(min=1, max=50, help="Worker nodes to start and kill.")] = 5,
) -> None:
    """Time from SIGKILL of a worker to its `offline` event on the websocket."""
    import json

    from bench.liveness import run

    typer.echo(json.dumps(run(kills=kills)))


@bench_app.command("recovery")
def bench_recovery(
    agents: Annotated[int, typer.Option(min=1000, help="Population size.")] = 100_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes per node (2 nodes).")] = 1,
    latency: Annotated[
        float, typer.Option(min=0.1, help="Seconds each agent waits per round (synthetic).")
    ] = 2.0,
    rounds: Annotated[int, typer.Option(min=6, help="Rounds of the simulation.")] = 8,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """A node SIGKILLed mid-round and the manager SIGKILLed mid-run: detection, the disturbed
    round against an undisturbed one, and the manager's resume."""
    import json

    from bench.recovery import run

    result = run(
        agents=agents, procs=procs, latency_s=latency, rounds=rounds, admin_url=database_admin_url
    )
    typer.echo(json.dumps(result))


@bench_app.command("synthetic")
def bench_synthetic(
    agents: Annotated[int, typer.Option(min=1, help="Agents to deploy and run.")] = 1_000_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes (one per core).")] = 2,
    latency: Annotated[
        float, typer.Option(min=0.0, help="Seconds each agent waits, standing in for an LLM call.")
    ] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed for attributes and decisions.")] = 7,
    rounds: Annotated[int, typer.Option(min=1, help="Rounds of the simulation.")] = 3,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
    naive_baseline: Annotated[
        bool, typer.Option(help="Also time one asyncio task per agent (a different workload).")
    ] = False,
) -> None:
    """Deploy through the manager's API on Postgres and run a synthetic simulation: round
    times with persistence. The synthetic policy waits once per cohort, not once per agent."""
    import json

    from bench.synthetic import run

    result = run(
        agents=agents,
        procs=procs,
        latency_s=latency,
        seed=seed,
        rounds=rounds,
        admin_url=database_admin_url,
        naive_baseline=naive_baseline,
    )
    typer.echo(json.dumps(result))


@bench_app.command("plugins")
def bench_plugins(
    agents: Annotated[int, typer.Option(min=1, help="Agents to deploy and run.")] = 1_000_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes (one per core).")] = 2,
    seed: Annotated[int, typer.Option(help="Seed for attributes and decisions.")] = 7,
    rounds: Annotated[int, typer.Option(min=1, help="Rounds of each simulation.")] = 3,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """On one population deployed through the manager's API on Postgres, run the guessing
    game (synthetic, no wait), public_goods and el_farol with their rule-based policies: round
    times with persistence, and each plugin's ratio to the guessing game's round."""
    import json

    from bench.plugins import run

    result = run(agents=agents, procs=procs, seed=seed, rounds=rounds, admin_url=database_admin_url)
    typer.echo(json.dumps(result))


@bench_app.command("network")
def bench_network(
    agents: Annotated[int, typer.Option(min=2, help="Agents to deploy and run.")] = 1_000_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes (one per core).")] = 2,
    mean_degree: Annotated[
        float, typer.Option(min=0.1, help="Mean degree of the Erdős–Rényi graph.")
    ] = 10.0,
    transmission: Annotated[
        float, typer.Option(min=0, max=1, help="SIR transmission per edge per round.")
    ] = 0.2,
    initial_infected: Annotated[int, typer.Option(min=1, help="First cases.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the graph and the epidemic.")] = 7,
    plugin: Annotated[
        str, typer.Option(help="sir (until no agent is infectious), voter or hegselmann_krause.")
    ] = "sir",
    max_rounds: Annotated[int, typer.Option(min=1, help="Rounds at most.")] = 500,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """Deploy a population with an Erdős–Rényi graph through the manager's API on Postgres and
    run the built-in SIR plugin until no agent is infectious (or the voter model or
    Hegselmann-Krause for --max-rounds): deploy time, round times, bytes sent worker to worker,
    the workers' memory per agent, and the attack rate beside the analytic final size."""
    import json

    from bench.network import PLUGINS, run

    if plugin not in PLUGINS:
        typer.echo(f"--plugin: one of {', '.join(PLUGINS)}, not {plugin!r}", err=True)
        raise typer.Exit(2)
    result = run(
        agents=agents,
        procs=procs,
        mean_degree=mean_degree,
        transmission=transmission,
        initial_infected=initial_infected,
        seed=seed,
        max_rounds=max_rounds,
        admin_url=database_admin_url,
        plugin=plugin,
    )
    typer.echo(json.dumps(result))


# `populace bench round`'s longer options.
BenchConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        help="Requests in flight in total, over every endpoint (default 4000; with "
        "--gemma one per server).",
    ),
]
ExchangeableOpt = Annotated[
    bool,
    typer.Option(
        "--exchangeable/--no-exchangeable",
        help="Personas over three categories and identical_prompts: share, so agents with "
        "one prompt draw from its answer distribution (fake servers with a toy model).",
    ),
]
GemmaOpt = Annotated[
    bool,
    typer.Option(
        "--gemma/--no-gemma",
        help="Exchangeable agents on real Gemma 3 270M: --servers llama.cpp servers with "
        "logprobs (the llm-local extra) instead of fake ones; the direct loop asks a "
        "sample of agents and is extrapolated.",
    ),
]


@bench_app.command("round")
def bench_round(
    policy: Annotated[str, typer.Option(help="The round's policy (llm).")] = "llm",
    agents: Annotated[int, typer.Option(min=1, help="Agents to deploy and run.")] = 100_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes (one per core).")] = 2,
    servers: Annotated[
        int, typer.Option(min=1, help="Fake OpenAI-compatible server processes (endpoints).")
    ] = 2,
    concurrency: BenchConcurrencyOpt = None,
    latency: Annotated[
        float, typer.Option(min=0.0, help="Seconds the fake servers take per request.")
    ] = 1.0,
    rounds: Annotated[int, typer.Option(min=1, help="Rounds of the simulation.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed for attributes and sampling.")] = 7,
    batch_size: Annotated[
        int, typer.Option(min=1, max=1024, help="Prompts per request (a prompt array).")
    ] = 1,
    exchangeable: ExchangeableOpt = False,
    gemma: GemmaOpt = False,
    integer_answers: Annotated[
        bool, typer.Option(help="The policy's integer_answers: players report whole numbers.")
    ] = False,
    direct_sample: Annotated[
        int, typer.Option(min=1, help="With --gemma: agents the direct loop asks.")
    ] = 200,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """An LLM round through the manager's API on Postgres against fake servers, and a direct
    client loop sending as many prompts in requests of the same size at the same concurrency
    (no manager, no persistence)."""
    import json

    from bench.round import run

    if policy != "llm":
        _fail(f"--policy must be llm; got {policy}")
    result = run(
        agents=agents,
        procs=procs,
        servers=servers,
        concurrency=concurrency,
        latency_s=latency,
        rounds=rounds,
        seed=seed,
        batch_size=batch_size,
        exchangeable=exchangeable,
        admin_url=database_admin_url,
        gemma=gemma,
        integer_answers=integer_answers,
        direct_sample=min(direct_sample, agents),
    )
    typer.echo(json.dumps(result))


@bench_app.command("deploy")
def bench_deploy(
    agents: Annotated[int, typer.Option(min=1000, help="Population size.")] = 1_000_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """Deploy a population on Postgres: stage timings, a raw COPY floor and deep page p95."""
    import json

    from bench.deploy import run

    typer.echo(json.dumps(run(agents=agents, procs=procs, admin_url=database_admin_url)))


@bench_app.command("decisions-layout")
def bench_decisions_layout(
    rows: Annotated[
        int, typer.Option(min=1000, help="Decisions in the round written.")
    ] = 10_000_000,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """Whether fewer indexes or a narrower row would store a round's decisions faster: the
    product's table against variants without the primary key and with a one-byte status."""
    import json

    from bench.decisions_layout import run

    typer.echo(json.dumps(run(rows=rows, admin_url=database_admin_url)))


@bench_app.command("stress")
def bench_stress(
    agents: Annotated[int, typer.Option(min=1000, help="Agents to deploy and play.")] = 10_000_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed for attributes, decisions and browsing.")] = 7,
    latency: Annotated[
        float, typer.Option(min=0.0, help="Seconds the synthetic round waits per cohort.")
    ] = 1.0,
    samples: Annotated[int, typer.Option(min=2, help="Agent-browser requests of each kind.")] = 40,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """The whole sequence at 10^7 agents on Postgres: deploy, a synthetic and a level-k round
    persisted, agent browsing, then clean-up to zero (verified), with peak RSS and CPU."""
    import json

    from bench.stress import run

    result = run(
        agents=agents,
        procs=procs,
        seed=seed,
        latency_s=latency,
        samples=samples,
        admin_url=database_admin_url,
    )
    typer.echo(json.dumps(result))


@bench_app.command("dashboard")
def bench_dashboard(
    agents: Annotated[int, typer.Option(min=1000, help="Agents stored.")] = 1_000_000,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
    latency: Annotated[
        float, typer.Option(min=0.0, help="Seconds per agent in the running synthetic rounds.")
    ] = 2.0,
    loads: Annotated[int, typer.Option(min=1, help="Fresh loads of the dashboard timed.")] = 10,
    events: Annotated[int, typer.Option(min=1, help="Round events timed to the DOM.")] = 5,
    samples: Annotated[
        int, typer.Option(min=2, help="Agent browser jumps (each followed by a Next page).")
    ] = 40,
    llm: Annotated[
        bool,
        typer.Option(
            help="Run an LLM simulation against a local OpenAI-compatible server instead "
            "(temperature 0: identical prompts share a request; the LLM meters are on; "
            "--latency is then each request's)."
        ),
    ] = False,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """The dashboard in Chromium with 10^6 agents and a round running: first paint, round
    event to DOM, agent browser page p95."""
    import json

    from bench.dashboard import run

    result = run(
        agents=agents,
        procs=procs,
        admin_url=database_admin_url,
        latency_s=latency,
        loads=loads,
        events=events,
        samples=samples,
        llm=llm,
    )
    typer.echo(json.dumps(result))


@bench_app.command("fleet")
def bench_fleet(
    workers: Annotated[int, typer.Option(min=1, help="Simulated worker processes.")] = 1000,
    seconds: Annotated[
        float, typer.Option(min=1.0, help="Measurement window, after registration and warm-up.")
    ] = 30.0,
    database: Annotated[
        str, typer.Option(help="The manager's store: sqlite (temp folder) or postgresql.")
    ] = "sqlite",
    hosts: Annotated[
        int, typer.Option(min=1, help="OS processes serving the simulated workers.")
    ] = 4,
    loads: Annotated[int, typer.Option(min=1, help="Fresh loads of the Cluster page timed.")] = 5,
    dashboard: Annotated[
        bool, typer.Option(help="Time the dashboard's Cluster page in Chromium.")
    ] = True,
    database_admin_url: DatabaseAdminUrlOpt = DEFAULT_DATABASE_ADMIN_URL,
) -> None:
    """Simulated workers heartbeating through the real worker plane: manager CPU, heartbeat
    rate and latency, and the Cluster page's first paint with every worker listed."""
    import json

    from bench.fleet import run

    if database not in ("sqlite", "postgresql"):
        _fail(f"--database must be sqlite or postgresql, not {database!r}")
    result = run(
        workers=workers,
        seconds=seconds,
        database=database,
        hosts=hosts,
        loads=loads,
        dashboard=dashboard,
        admin_url=database_admin_url,
    )
    typer.echo(json.dumps(result))


@bench_app.command("llm")
def bench_llm(
    server: Annotated[
        list[str] | None,
        typer.Option(help="fixed-latency and/or gemma-local (default: both, in that order)."),
    ] = None,
    agents: Annotated[
        int, typer.Option(min=1, help="Agents against the fixed-latency server.")
    ] = 5000,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Requests in flight against the fixed-latency server.")
    ] = 256,
    latency: Annotated[
        float, typer.Option(min=0.0, help="Seconds the fixed-latency server takes per request.")
    ] = 0.5,
    gemma_agents: Annotated[int, typer.Option(min=1, help="Agents against Gemma on CPU.")] = 40,
    gemma_concurrency: Annotated[
        int, typer.Option(min=1, help="Requests in flight against Gemma (it serves one at a time).")
    ] = 2,
    gemma_replicas: Annotated[
        int, typer.Option(min=1, help="Gemma server processes, each listed as an endpoint.")
    ] = 1,
    gemma_threads: Annotated[
        int, typer.Option(min=0, help="CPU threads for Gemma in total (0: all cores but one).")
    ] = 0,
    procs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed for personas and sampling.")] = 7,
) -> None:
    """Platform LLM throughput over a direct client loop at the same concurrency (target >= 0.9)."""
    import json

    from bench.llm import Target, measure

    targets = {
        "fixed-latency": Target("fixed-latency", agents, concurrency, latency),
        # More, smaller alternations: a Gemma answer takes long enough for load to drift.
        "gemma-local": Target(
            "gemma-local", gemma_agents, gemma_concurrency, None, gemma_replicas, gemma_threads, 4
        ),
    }
    chosen = server or list(targets)
    unknown = sorted(set(chosen) - set(targets))
    if unknown:
        _fail(f"--server must be one of {', '.join(targets)}; got {', '.join(unknown)}")
    for name in chosen:
        typer.echo(json.dumps(measure(targets[name], procs=procs, seed=seed)))


@bench_app.command("prompt-cache")
def bench_prompt_cache(
    agents: Annotated[int, typer.Option(min=2, help="Agents whose prompts are sent.")] = 20,
    round_number: Annotated[
        int, typer.Option("--round", min=1, help="Round played (earlier ones are history).")
    ] = 2,
    system: Annotated[
        str, typer.Option(help="System prompt variant: plain, rational, named or roleplay.")
    ] = "roleplay",
    threads: Annotated[
        int, typer.Option(min=0, help="CPU threads for Gemma (0: all cores but one).")
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed for personas, history and sampling.")] = 7,
) -> None:
    """Prompt tokens llama.cpp reuses from its prefix cache: the persona-first default template
    against the shared-first one, one Gemma server, one request at a time (extra llm-local)."""
    import json

    from backend.llm_local import LlmExtraMissing, check_extra
    from bench.prompt_cache import run

    if system not in ("plain", "rational", "named", "roleplay"):
        _fail(f"--system must be plain, rational, named or roleplay; got {system}")
    try:
        check_extra()
    except LlmExtraMissing as exc:
        _fail(str(exc))
    result = run(
        agents=agents, round_number=round_number, system=system, threads=threads, seed=seed
    )
    typer.echo(json.dumps(result))


@llm_app.command("serve-local")
def llm_serve_local(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=1, max=65535, help="Port (replica i listens on port+i).")
    ] = 8081,
    threads: Annotated[
        int,
        typer.Option(
            min=0, help="CPU threads in total, split between replicas (0: all cores but one)."
        ),
    ] = 0,
    ctx: Annotated[int, typer.Option(min=256, help="Context size in tokens.")] = 2048,
    replicas: Annotated[
        int,
        typer.Option(
            min=1,
            help="Server processes; each serves one request at a time (list each as an endpoint).",
        ),
    ] = 1,
    model_path: Annotated[
        Path | None,
        typer.Option(help="A .gguf file (default: Gemma 3 270M from the installed package)."),
    ] = None,
    model_name: Annotated[
        str, typer.Option(help="Model name the server answers to.")
    ] = "gemma-3-270m",
    data_dir: Annotated[
        Path | None,
        typer.Option(
            envvar="POPULACE_DATA_DIR",
            help="The model is assembled once into DATA_DIR/models (default ./.populace).",
        ),
    ] = None,
    logprobs: Annotated[
        bool,
        typer.Option(
            help="Return next-token log-probabilities (exchangeable agents read answer "
            "distributions from them; each answer then costs more)."
        ),
    ] = False,
) -> None:
    """Serve Gemma 3 270M on CPU with llama.cpp's OpenAI-compatible server (extra llm-local)."""
    from backend.llm_local import LlmExtraMissing, LocalLlmFailed, check_extra, serve_local

    try:
        check_extra()
        code = serve_local(
            host=host,
            port=port,
            threads=threads,
            ctx=ctx,
            replicas=replicas,
            model_path=model_path,
            data_dir=data_dir,
            model_alias=model_name,
            logprobs=logprobs,
        )
    except (LlmExtraMissing, LocalLlmFailed, FileNotFoundError) as exc:
        _fail(str(exc), code=1)
    raise typer.Exit(code)


def main() -> None:
    try:
        app(prog_name="populace")
    except Exception as exc:
        # A manager that is down is the user's situation, not a bug: one line, not a traceback.
        line = unreachable(exc)
        if line is None:
            raise
        typer.secho(f"populace: {line}", err=True, fg=typer.colors.RED)
        sys.exit(1)


if __name__ == "__main__":
    sys.exit(main())
