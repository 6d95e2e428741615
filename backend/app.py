"""The manager's FastAPI application: API routers, the event socket, the dashboard, background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles

from backend.api import agents, cluster, events_ws, info, populations, simulations, worker_plane
from backend.api import interviews as interview_routes
from backend.api import sweeps as sweeps_api
from backend.api.body_limit import BodySizeLimit
from backend.api.errors import install_error_handlers
from backend.api.llm_test import router as llm_test_router
from backend.api.nul_guard import NulGuard
from backend.api.openapi import install_openapi
from backend.db.migrate import upgrade
from backend.db.session import make_engine, make_sessionmaker
from backend.events.hub import EventHub
from backend.populations.cleanup import reap_forever
from backend.populations.keeper import PlacementKeeper
from backend.reconcile import reconcile_at_startup
from backend.settings import ManagerSettings
from backend.simulations.runner import RunningSimulations
from backend.workers.channels import directory as worker_directory
from backend.workers.liveness import Liveness

log = logging.getLogger(__name__)

# Every router the app serves, in matching order. The worker plane goes before the cluster
# routes so /api/workers/register is not taken for /api/workers/{worker_id}.
ROUTERS = (
    info.health_router,
    info.router,
    worker_plane.router,
    cluster.router,
    populations.router,
    agents.router,
    simulations.router,
    interview_routes.router,
    sweeps_api.router,
    llm_test_router,
    events_ws.router,
)


def create_app(settings: ManagerSettings) -> FastAPI:
    if settings.api_token is None or settings.join_token is None:
        raise ValueError("create_app needs both tokens; call backend.tokens.ensure_tokens first")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Alembic's env runs its own event loop, so it goes to a thread.
        await asyncio.to_thread(upgrade, settings.database_url)
        engine = make_engine(settings.database_url)
        app.state.engine = engine
        app.state.sessionmaker = make_sessionmaker(engine)
        # The manager calls workers with the secrets they registered with, from the store.
        async with app.state.sessionmaker() as session:
            await worker_directory.load(session)
        app.state.keeper = PlacementKeeper(
            app.state.sessionmaker,
            app.state.hub,
            replace_after_s=settings.replace_after_s,
            interval_s=settings.keeper_interval_s,
            full_check_s=settings.reaper_interval_s,
        )
        await reconcile_at_startup(app.state)
        loops = [
            asyncio.create_task(app.state.liveness.run_forever(app.state.sessionmaker)),
            asyncio.create_task(
                reap_forever(app.state.sessionmaker, app.state.liveness, settings.reaper_interval_s)
            ),
            asyncio.create_task(app.state.keeper.run_forever()),
        ]
        try:
            yield
        finally:
            # Deploys and deletes in flight undo or finish what they can when cancelled.
            tasks = [*loops, *app.state.background]
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await engine.dispose()

    # The schema is served under /api with the token like every other route, not at an open /docs.
    app = FastAPI(
        title="populace manager", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None
    )
    app.state.settings = settings
    worker_directory.use_ca(settings.tls_ca)
    app.state.hub = EventHub()
    app.state.liveness = Liveness(
        app.state.hub,
        heartbeat_interval_s=settings.heartbeat_interval_s,
        ttl_s=settings.worker_ttl_s,
        max_beats_per_s=settings.max_heartbeats_per_s,
        flush_s=settings.liveness_flush_s,
        sweep_s=settings.liveness_sweep_s,
        startup_grace_s=settings.startup_grace_s,
    )
    app.state.background = set()
    app.state.simulations = RunningSimulations()

    for router in ROUTERS:
        app.include_router(router)
    _mount_dashboard(app, settings)
    # Bounded, clear input: bodies capped as they stream, NUL refused in paths and queries,
    # every error in the one {"detail": ...} shape, the config bodies in the schema.
    app.add_middleware(NulGuard)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    install_error_handlers(app)
    install_openapi(app)
    return app


def _mount_dashboard(app: FastAPI, settings: ManagerSettings) -> None:
    dist = settings.frontend_dist
    index = dist / "index.html"
    if (dist / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=dist / "assets"), name="assets")

    @app.get("/{path:path}", include_in_schema=False)
    async def dashboard(path: str):
        # Unknown API paths stay JSON 404s; everything else is the single-page app.
        if path.startswith(("api/", "ws/")) or path in ("api", "ws"):
            raise HTTPException(404, f"no such route: /{path}")
        try:  # a name too long for the filesystem is no file, not a 500
            candidate = (dist / path).resolve()
            found = bool(path) and candidate.is_file() and candidate.is_relative_to(dist.resolve())
        except OSError:
            found = False
        if found:
            return FileResponse(candidate)
        if not index.is_file():
            return PlainTextResponse(
                f"The dashboard is not built ({index} is missing): run `make frontend`.",
                status_code=503,
            )
        return FileResponse(index)
