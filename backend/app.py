"""The manager's FastAPI application: API routers, the event socket, the dashboard, background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware

from backend.alerts import alerts_from_settings
from backend.api import (
    agents,
    cluster,
    events_ws,
    groups,
    info,
    populations,
    simulations,
    worker_plane,
)
from backend.api import interviews as interview_routes
from backend.api import plugins as plugin_routes
from backend.api import sweeps as sweeps_api
from backend.api.body_limit import BodySizeLimit
from backend.api.dashboard import mount_dashboard
from backend.api.errors import install_error_handlers
from backend.api.fence_wait import FenceWait
from backend.api.llm_test import router as llm_test_router
from backend.api.metrics import router as metrics_router
from backend.api.nul_guard import NulGuard
from backend.api.openapi import install_openapi
from backend.db.lease import Lease, lease_for
from backend.db.lease import watch as watch_lease
from backend.db.migrate import upgrade
from backend.db.session import make_engine, make_sessionmaker
from backend.db.write_fence import ManagerNotActive, WriteFence
from backend.events.hub import EventHub
from backend.metrics import ManagerMetrics
from backend.populations.cleanup import reap_forever
from backend.populations.keeper import PlacementKeeper
from backend.reconcile import reconcile_at_startup
from backend.runtime import Runtime
from backend.settings import ManagerSettings
from backend.shutdown import LEASE_LOST_EXIT_CODE, Shutdown, describe_task
from backend.simulations.runner import RunningSimulations
from backend.simulations.timeline import RunTimeline
from backend.sweeps.runner import RunningSweeps
from backend.workers import registry
from backend.workers.channels import directory as worker_directory
from backend.workers.history import WorkerHistory
from backend.workers.liveness import Liveness
from backend.workers.secret_box import box as worker_secret_box

log = logging.getLogger(__name__)

# Every router the app serves, in matching order. The worker plane goes before the cluster
# routes so /api/workers/register is not taken for /api/workers/{worker_id}.
ROUTERS = (
    info.health_router,
    info.router,
    worker_plane.router,
    cluster.router,
    cluster.history_router,
    populations.router,
    agents.router,
    simulations.router,
    groups.router,
    plugin_routes.router,
    interview_routes.router,
    sweeps_api.router,
    llm_test_router,
    metrics_router,
    events_ws.router,
)


def create_app(settings: ManagerSettings) -> FastAPI:
    if settings.api_token is None or settings.join_token is None:
        raise ValueError("create_app needs both tokens; call backend.tokens.ensure_tokens first")
    # The schema is served under /api with the token like every other route, not at an open /docs.
    app = FastAPI(
        title="populace manager",
        lifespan=_lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    worker_directory.use_ca(settings.tls_ca)
    worker_secret_box.configure(settings)  # workers' RPC secrets are sealed in the store
    # The one thing kept on the app: routes reach every service through it (backend.deps).
    runtime = app.state.runtime = _runtime(settings)
    for router in ROUTERS:
        app.include_router(router)
    mount_dashboard(app, settings)
    # Bounded, clear input: bodies capped as they stream, NUL refused in paths and queries,
    # every error in the one {"detail": ...} shape, the config bodies in the schema.
    app.add_middleware(NulGuard)
    # A change asked for while the lease is being taken again waits for it a moment, not 503.
    app.add_middleware(FenceWait, fence=runtime.fence, timeout_s=2 * settings.lease_check_s)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
    )
    # Outermost: JSON, the page and streamed exports go gzipped to a client that takes it (a
    # stream is flushed chunk by chunk, so it still streams). Precompressed assets pass as
    # they are (backend.api.dashboard); Parquet is compressed already; the event socket is no
    # HTTP response.
    app.add_middleware(
        GZipMiddleware,
        minimum_size=1024,
        compresslevel=6,
        exclude_content_types=(*DEFAULT_EXCLUDED_CONTENT_TYPES, "application/vnd.apache.parquet"),
    )
    install_error_handlers(app)
    app.add_exception_handler(ManagerNotActive, _not_active)
    install_openapi(app)
    return app


def _runtime(settings: ManagerSettings) -> Runtime:
    """The services that exist from the app's creation (the store's come with serving)."""
    hub = EventHub()
    liveness = Liveness(
        hub,
        heartbeat_interval_s=settings.heartbeat_interval_s,
        ttl_s=settings.worker_ttl_s,
        max_beats_per_s=settings.max_heartbeats_per_s,
        flush_s=settings.liveness_flush_s,
        sweep_s=settings.liveness_sweep_s,
        startup_grace_s=settings.startup_grace_s,
        history=WorkerHistory(
            bucket_s=settings.history_bucket_s, window_s=settings.history_window_s
        ),
    )
    # Prometheus series, in this app's own registry (tests run several apps in one process).
    metrics = ManagerMetrics(hub)
    hub.observe(metrics.on_event)
    liveness.on_beat_gap = metrics.heartbeat_gap.observe
    return Runtime(
        settings=settings,
        shutdown=Shutdown(settings.shutdown_timeout_s),
        fence=WriteFence(),
        hub=hub,
        liveness=liveness,
        metrics=metrics,
        simulations=RunningSimulations(),
        sweeps=RunningSweeps(),
    )


@asynccontextmanager
async def _lifespan(app: FastAPI):
    runtime: Runtime = app.state.runtime
    settings, shutdown = runtime.settings, runtime.shutdown
    # One manager acts on a database: a second one waits here, before its port opens.
    lease = lease_for(settings.database_url)
    shutdown.phase = "starting: waiting for the database lease"
    if not await lease.acquire(shutdown.stopping, settings.lease_check_s):
        log.info("stopped while waiting for the database lease: nothing to clean up")
        if shutdown.exit_process is not None:
            shutdown.exit_process(0)
        raise RuntimeError("stopped before taking the database lease")
    log.info("database lease taken: this manager acts on the database")
    started = False
    try:
        async with _serving(runtime, lease):
            started = True
            yield
    except Exception:
        if started or not shutdown.stopping.is_set():
            raise
        # Told to stop while starting: what failed since (a refused write) is no error.
        log.info("stopped during start-up (%s)", shutdown.phase)
        await lease.release()
        if shutdown.exit_process is not None:
            shutdown.exit_process(0)
        raise
    finally:
        await lease.release()


@asynccontextmanager
async def _serving(runtime: Runtime, lease: Lease):
    settings, shutdown, fence = runtime.settings, runtime.shutdown, runtime.fence
    shutdown.phase = "starting: upgrading the database schema"
    # Alembic's env runs its own event loop, so it goes to a thread.
    await asyncio.to_thread(upgrade, settings.database_url)
    engine = make_engine(settings.database_url)
    runtime.engine = engine
    runtime.metrics.watch_engine(engine)
    fence.attach(engine)
    runtime.sessionmaker = make_sessionmaker(engine)
    loops: list[asyncio.Task] = []

    def stop_acting() -> None:
        # First the writes (whatever a task still tries), then the tasks that make them:
        # liveness, keeper, reaper, runs; deploys and deletes in flight are finished or
        # undone by the next start (backend.reconcile).
        fence.close("the manager is stopping", final=True)
        for task in [*loops, *runtime.background]:
            task.cancel()

    shutdown.on_stop.append(stop_acting)
    if shutdown.stopping.is_set():  # told to stop during the migrations
        stop_acting()
    shutdown.phase = "starting: loading workers and reconciling"
    alerts = await _start_services(runtime)
    await reconcile_at_startup(runtime)
    if not shutdown.stopping.is_set():
        coroutines = _loops(runtime, lease, alerts)
        loops.extend(asyncio.create_task(c, name=n) for n, c in coroutines.items())
    shutdown.phase = "serving"
    try:
        yield
    finally:
        shutdown.begin("the server stopped")  # starts the clock, if no signal did
        stop_acting()  # again: tasks started since the signal
        shutdown.phase = "stopping background tasks"
        await _settle([*loops, *runtime.background], shutdown)
        shutdown.phase = "closing the database connections"
        with contextlib.suppress(Exception):
            await asyncio.wait_for(engine.dispose(), max(shutdown.remaining(0.5), 0.1))
        shutdown.phase = "releasing the database lease"


async def _start_services(runtime: Runtime):
    """The services that need the store: the workers' directory, the placement keeper, the run
    timeline and the alerts (returned: None when none are configured)."""
    settings = runtime.settings
    # The manager calls workers with the secrets they registered with, from the store.
    async with runtime.sessionmaker() as session:
        await registry.load_directory(session)
    runtime.keeper = PlacementKeeper(
        runtime.sessionmaker,
        runtime.hub,
        replace_after_s=settings.replace_after_s,
        interval_s=settings.keeper_interval_s,
        full_check_s=settings.reaper_interval_s,
    )
    # The run timeline announces the entries each change stores with it (following the hub
    # for its cues from before the first run (re)starts); alerts hear of failed and paused
    # runs from it, and of offline workers from the liveness sweep.
    alerts = alerts_from_settings(settings)
    runtime.timeline = RunTimeline(
        runtime.hub,
        runtime.sessionmaker,
        on_entry=[alerts.on_timeline_entry] if alerts is not None else [],
    )
    runtime.timeline.subscribe()
    if alerts is not None:
        runtime.liveness.offline_listeners.append(alerts.on_worker_offline)
    return alerts


def _loops(runtime: Runtime, lease: Lease, alerts) -> dict[str, Coroutine]:
    """The manager's background loops, by name, to run while it serves."""
    settings, shutdown, fence = runtime.settings, runtime.shutdown, runtime.fence
    sessionmaker = runtime.sessionmaker
    coroutines = {
        "run timeline": runtime.timeline.run_forever(),
        "liveness sweep": runtime.liveness.run_forever(sessionmaker),
        "reaper": reap_forever(sessionmaker, runtime.liveness, settings.reaper_interval_s),
        "placement keeper": runtime.keeper.run_forever(),
        "database lease watch": watch_lease(
            lease,
            settings.lease_check_s,
            on_lost=lambda: fence.close("the database lease is lost"),
            on_back=lambda: None if shutdown.stopping.is_set() else fence.open(),
            on_taken=lambda who: _lease_taken(shutdown, who),
        ),
    }
    if alerts is not None:
        coroutines["alerts"] = alerts.sender.run_forever()
    return coroutines


async def _settle(tasks: list[asyncio.Task], shutdown: Shutdown) -> None:
    """Wait for the cancelled tasks within what is left of the shutdown bound; name those that
    did not stop (a served process then exits at once, with HUNG_EXIT_CODE)."""
    if not tasks:
        return
    done, pending = await asyncio.wait(tasks, timeout=shutdown.remaining(margin=0.5))
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s ended with %r while stopping", task.get_name(), task.exception())
    if pending:
        shutdown.hung("background tasks did not stop: " + "; ".join(map(describe_task, pending)))


def _lease_taken(shutdown: Shutdown, holder: str) -> None:
    log.error("another manager took the database lease (%s): this one stops", holder)
    shutdown.begin("the database lease was taken by another manager", LEASE_LOST_EXIT_CODE)


async def _not_active(_request, exc: ManagerNotActive) -> JSONResponse:
    # Stopping, or the database lease is in doubt: nothing is written; try again (another
    # manager, or this one once its lease is back).
    return JSONResponse(
        {"detail": f"the manager cannot change anything now: {exc.reason}; try again shortly"},
        status_code=503,
        headers={"Retry-After": "5"},
    )
