"""`populace manager`'s server: uvicorn, with a shutdown that starts at the signal and is bounded
(backend.shutdown)."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from backend.shutdown import Shutdown, exit_now

# uvicorn's status when the app did not start.
STARTUP_FAILURE = 3


class _ManagerServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, shutdown: Shutdown) -> None:
        super().__init__(config)
        self._shutdown = shutdown

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # Stop acting now, not once every connection has drained; the bound starts here.
        self._shutdown.signalled(f"{signal.Signals(sig).name} received")


def serve_manager(app: FastAPI, **uvicorn_options: Any) -> int:
    """Serve until stopped; returns the process's exit status. A SIGTERM or SIGINT ends the
    process by that signal once it has stopped (as uvicorn does); a shutdown past its bound
    ends it with HUNG_EXIT_CODE; a lost lease with LEASE_LOST_EXIT_CODE."""
    shutdown: Shutdown = app.state.runtime.shutdown
    config = uvicorn.Config(
        app,
        # Open requests get half the bound to finish; then the app's own shutdown runs.
        timeout_graceful_shutdown=max(1, int(shutdown.timeout_s / 2)),
        **uvicorn_options,
    )
    server = _ManagerServer(config, shutdown)
    shutdown.exit_process = exit_now
    shutdown.stop_serving = lambda: setattr(server, "should_exit", True)
    server.run()
    if shutdown.exit_code is not None:
        return shutdown.exit_code
    return 0 if server.started else STARTUP_FAILURE
