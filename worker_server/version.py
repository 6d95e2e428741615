"""The populace version this worker reports to the manager and over gRPC."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def populace_version() -> str:
    try:
        return version("populace")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
