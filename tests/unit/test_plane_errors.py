"""The translator from a worker's gRPC failures to the manager's worker-plane errors."""

from __future__ import annotations

import grpc
import pytest

from backend.workers import plane_errors
from backend.workers.plane_errors import (
    ERROR_DETAIL_KEY,
    WorkerCallCancelled,
    WorkerConflict,
    WorkerDeadlineExceeded,
    WorkerFailed,
    WorkerFull,
    WorkerGone,
    WorkerNotHosting,
    WorkerPlaneError,
    WorkerPluginFailed,
    WorkerRefused,
    WorkerStream,
    WorkerUnauthenticated,
    WorkerUnavailable,
    field_path,
    translate,
    translated,
)
from worker_server import servicer
from worker_server.llm.client import LlmClient
from worker_server.rpc import worker_pb2 as pb
from worker_server.stats import LoadCounters

ADDRESS = "10.0.0.7:50051"

EXPECTED = {
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


def _error(code: grpc.StatusCode, details: str | None = "why", field: str | None = None):
    trailing = grpc.aio.Metadata()
    if field is not None:
        trailing.add(ERROR_DETAIL_KEY, pb.ErrorDetail(field=field).SerializeToString())
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details)


@pytest.mark.parametrize("code", [c for c in grpc.StatusCode if c != grpc.StatusCode.OK])
def test_every_status_code_maps_to_its_error_with_address_and_message(code):
    error = translate(ADDRESS, _error(code, f"the worker says {code.name}"))
    assert type(error) is EXPECTED.get(code, WorkerFailed)
    assert isinstance(error, WorkerPlaneError)
    assert error.address == ADDRESS
    assert error.message == f"the worker says {code.name}"
    assert error.status == code.name
    assert error.field == ()
    # Still what the client always raised, for code that drives it directly.
    assert isinstance(error, grpc.aio.AioRpcError)
    assert error.code() == code and error.details() == f"the worker says {code.name}"


def test_a_dead_or_frozen_worker_is_gone_and_nothing_else_is():
    gone = {c for c in EXPECTED if issubclass(EXPECTED[c], WorkerGone)}
    assert gone == {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
    assert not issubclass(WorkerFailed, WorkerGone)


def test_a_missing_message_is_empty():
    assert translate(ADDRESS, _error(grpc.StatusCode.INTERNAL, None)).message == ""


def test_the_structured_field_is_read_from_the_error_detail():
    error = translate(
        ADDRESS,
        _error(grpc.StatusCode.INVALID_ARGUMENT, "host not allowed", "endpoints.2.base_url"),
    )
    assert isinstance(error, WorkerRefused)
    assert error.field == ("endpoints", 2, "base_url")
    assert error.message == "host not allowed"  # the message is never parsed for it


def test_field_path():
    assert field_path("") == ()
    assert field_path("endpoints.0.api_key_env") == ("endpoints", 0, "api_key_env")


def test_translated_raises_the_domain_error_and_passes_others_through():
    with pytest.raises(WorkerUnavailable) as raised, translated(ADDRESS):
        raise _error(grpc.StatusCode.UNAVAILABLE, "connection refused")
    assert raised.value.address == ADDRESS
    assert raised.value.message == "connection refused"
    with pytest.raises(ValueError), translated(ADDRESS):
        raise ValueError("not the worker's")
    # Translated once: an error already translated keeps the address it was raised with.
    first = translate("a:1", _error(grpc.StatusCode.INTERNAL))
    with pytest.raises(WorkerFailed) as again, translated("b:2"):
        raise first
    assert again.value is first


class _Call:
    """A server-streaming call: some messages, then EOF or a failure."""

    def __init__(self, messages, failure=None):
        self._messages = list(messages)
        self._failure = failure
        self.cancelled = False

    def __aiter__(self):
        return self._iterate()

    async def _iterate(self):
        for message in self._messages:
            yield message
        if self._failure is not None:
            raise self._failure

    async def read(self):
        if self._messages:
            return self._messages.pop(0)
        if self._failure is not None:
            raise self._failure
        return grpc.aio.EOF

    def cancel(self):
        self.cancelled = True
        return True


async def test_a_stream_translates_its_failure_and_ends_with_none():
    stream = WorkerStream(ADDRESS, _Call(["a", "b"], _error(grpc.StatusCode.FAILED_PRECONDITION)))
    seen = []
    with pytest.raises(WorkerPluginFailed) as raised:
        async for message in stream:
            seen.append(message)
    assert seen == ["a", "b"] and raised.value.address == ADDRESS

    read = WorkerStream(ADDRESS, _Call(["a"]))
    assert await read.read() == "a"
    assert await read.read() is None
    call = _Call([], _error(grpc.StatusCode.NOT_FOUND, "agent 7 is not hosted here"))
    failing = WorkerStream(ADDRESS, call)
    with pytest.raises(WorkerNotHosting, match="agent 7"):
        await failing.read()
    assert failing.cancel() and call.cancelled


class _Aborted(Exception):
    pass


class _Context:
    """What the servicer's abort is given, as grpc would send it."""

    async def abort(self, code, details, trailing_metadata=()):
        self.code, self.details, self.trailing = code, details, trailing_metadata
        raise _Aborted


async def test_the_worker_sends_the_field_the_translator_reads():
    worker = object.__new__(servicer.WorkerServicer)
    worker._llm = LlmClient(LoadCounters())
    request = pb.ProbeLlmRequest(
        endpoints=[
            pb.LlmEndpoint(base_url="http://ok:8000", model="m"),
            pb.LlmEndpoint(base_url="gpu-3:8000", model="m"),
        ]
    )
    context = _Context()
    with pytest.raises(_Aborted):
        await worker.ProbeLlm(request, context)
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT
    error = translate(
        ADDRESS,
        grpc.aio.AioRpcError(
            context.code, grpc.aio.Metadata(), grpc.aio.Metadata(*context.trailing), context.details
        ),
    )
    assert isinstance(error, WorkerRefused)
    assert error.field == ("endpoints", 1, "base_url")
    assert error.message.startswith("endpoints[1].base_url must be an http(s) URL")


def test_both_sides_name_the_detail_by_the_proto():
    assert (
        servicer.ERROR_DETAIL_KEY == plane_errors.ERROR_DETAIL_KEY == "populace.v1.errordetail-bin"
    )
