"""Exit codes of a worker process and of the node supervisor (`populace worker`)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # stopped by a signal, removed by an operator, or orphaned by its supervisor
    ERROR = 1  # an unexpected crash
    CONFIG = 2  # bad settings, or the manager refused the registration request (4xx, e.g. 422)
    JOIN_TOKEN_REJECTED = 3  # the manager answered 401 invalid join token
    BIND_FAILED = 4  # the gRPC port could not be bound (in use, bad host)
