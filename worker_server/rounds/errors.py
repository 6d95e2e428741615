"""Why a round did not run or did not finish; the servicer maps these to gRPC status codes."""

from __future__ import annotations


class InvalidRound(ValueError):
    """A request that cannot run (INVALID_ARGUMENT), found before any agent acts."""


class RoundAlreadyRunning(Exception):
    """A round with this round_id is running here already (ALREADY_EXISTS)."""


class RoundCancelled(Exception):
    """CancelRound stopped the round (CANCELLED): no aggregate is sent."""


class RoundFailed(RuntimeError):
    """A policy failed while the round ran (INTERNAL)."""


class PluginFailed(RoundFailed):
    """The simulation plugin's own code raised or broke its contract while the round ran
    (FAILED_PRECONDITION): every worker would fail the same way, so the manager pauses the run
    with this error instead of counting the worker as failed."""
