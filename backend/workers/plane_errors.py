"""What a failed call to a worker process means: the one translator from gRPC status codes to
the manager's worker-plane errors.

WorkerClient applies it to every call and stream, so the rest of the manager catches these
classes and never reads a gRPC status code. Each error keeps the worker's address, its message
and the request field it names (structured, from the worker's ErrorDetail; never parsed out of
the message). Each is still a grpc.aio.AioRpcError (code(), details()), so code that drives the
client directly (scripts, tests) sees what it always saw.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from worker_server.rpc import worker_pb2 as pb

# The worker sends an ErrorDetail in trailing metadata under the message's own name, so the
# proto owns the key (a "-bin" key carries bytes).
ERROR_DETAIL_KEY = f"{pb.ErrorDetail.DESCRIPTOR.full_name.lower()}-bin"

Field = tuple[str | int, ...]


class WorkerPlaneError(grpc.aio.AioRpcError):
    """A call to the worker at `address` failed. `message` is the worker's own words, `status`
    the status name (for messages to users), `field` the request field it names, as a path
    (("endpoints", 0, "base_url")), or () when it names none."""

    def __init__(self, address: str, error: grpc.aio.AioRpcError) -> None:
        super().__init__(
            error.code(),
            error.initial_metadata(),
            error.trailing_metadata(),
            error.details(),
            error.debug_error_string(),
        )
        self.address = address
        self.message = error.details() or ""
        self.status = error.code().name
        self.field = _detail_field(error.trailing_metadata())


class WorkerGone(WorkerPlaneError):
    """The worker did not answer: dead, frozen or out of reach. The worker's fault, not the
    request's; rounds recover from it by hosting its agents elsewhere."""


class WorkerUnavailable(WorkerGone):
    """UNAVAILABLE: no process answers at the address (or the connection broke)."""


class WorkerDeadlineExceeded(WorkerGone):
    """DEADLINE_EXCEEDED: the worker did not answer in time."""


class WorkerRefused(WorkerPlaneError):
    """INVALID_ARGUMENT: the worker refuses the request; the message names the field."""


class WorkerUnauthenticated(WorkerPlaneError):
    """UNAUTHENTICATED: the worker does not accept the secret the call carried."""


class WorkerNotHosting(WorkerPlaneError):
    """NOT_FOUND: the worker does not host what the call names (an agent)."""


class WorkerFull(WorkerPlaneError):
    """RESOURCE_EXHAUSTED: the worker has no room for what it was sent."""


class WorkerConflict(WorkerPlaneError):
    """ALREADY_EXISTS: a round with that id is already running on the worker."""


class WorkerPluginFailed(WorkerPlaneError):
    """FAILED_PRECONDITION: the simulation's plugin raised on the worker."""


class WorkerCallCancelled(WorkerPlaneError):
    """CANCELLED: the call was stopped (a round cancelled by CancelRound)."""


class WorkerFailed(WorkerPlaneError):
    """Any other status (INTERNAL, UNKNOWN, ...): the worker failed the call."""


_BY_CODE: dict[grpc.StatusCode, type[WorkerPlaneError]] = {
    grpc.StatusCode.UNAVAILABLE: WorkerUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: WorkerDeadlineExceeded,
    grpc.StatusCode.INVALID_ARGUMENT: WorkerRefused,
    grpc.StatusCode.UNAUTHENTICATED: WorkerUnauthenticated,
    grpc.StatusCode.NOT_FOUND: WorkerNotHosting,
    grpc.StatusCode.RESOURCE_EXHAUSTED: WorkerFull,
    grpc.StatusCode.ALREADY_EXISTS: WorkerConflict,
    grpc.StatusCode.FAILED_PRECONDITION: WorkerPluginFailed,
    grpc.StatusCode.CANCELLED: WorkerCallCancelled,
}


def translate(address: str, error: grpc.aio.AioRpcError) -> WorkerPlaneError:
    """The worker-plane error a failed call to the worker at `address` stands for."""
    if isinstance(error, WorkerPlaneError):
        return error
    return _BY_CODE.get(error.code(), WorkerFailed)(address, error)


@contextmanager
def translated(address: str) -> Iterator[None]:
    """Raise a gRPC failure inside the block as its worker-plane error."""
    try:
        yield
    except WorkerPlaneError:
        raise
    except grpc.aio.AioRpcError as exc:
        raise translate(address, exc) from exc


def field_path(path: str) -> Field:
    """("endpoints", 0, "base_url") for "endpoints.0.base_url" (the wire form of a field)."""
    if not path:
        return ()
    return tuple(int(part) if part.isdigit() else part for part in path.split("."))


def _detail_field(metadata: Any) -> Field:
    for key, value in metadata or ():
        if key == ERROR_DETAIL_KEY:
            detail = pb.ErrorDetail()
            detail.ParseFromString(value)
            return field_path(detail.field)
    return ()


class WorkerStream:
    """A server-streaming call to a worker whose failures arrive as worker-plane errors:
    iterate it, or read() it message by message (None at the end)."""

    def __init__(self, address: str, call: Any) -> None:
        self.address = address
        self._call = call

    async def __aiter__(self) -> AsyncIterator[Any]:
        with translated(self.address):
            async for message in self._call:
                yield message

    async def read(self) -> Any:
        with translated(self.address):
            message = await self._call.read()
        return None if message is grpc.aio.EOF else message

    def cancel(self) -> bool:
        return self._call.cancel()
