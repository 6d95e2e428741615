"""Only the manager drives a worker: every gRPC call but health checks carries the process's secret.

Each worker process has one RPC secret (POPULACE_RPC_SECRET, or a random one per process). It
sends it to the manager inside its registration (over the join-token-authenticated HTTP plane,
HTTPS when TLS is on); the manager then sends it as `authorization: Bearer <secret>` metadata
on every call. A call without it, or with another, is refused with UNAUTHENTICATED before any
handler runs. The standard health service stays open so load balancers and probes can use it.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

import grpc

METADATA_KEY = "authorization"
# Health checks answer SERVING / NOT_SERVING and nothing else: safe to leave open.
OPEN_SERVICES = ("/grpc.health.v1.Health/",)


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    """The call metadata that authenticates a call made with `secret`."""
    return ((METADATA_KEY, f"Bearer {secret}"),)


def _presented_secret(details: grpc.HandlerCallDetails) -> str | None:
    for key, value in details.invocation_metadata or ():
        if key == METADATA_KEY and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer ") :]
    return None


class RpcSecretInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call to a protected service that does not present the process's secret;
    the methods of the peer plane (`peer_methods`) also take the peer credential, which the
    manager hands to the other processes of a network simulation."""

    def __init__(
        self, secret: str, peer_credential: str = "", peer_methods: tuple[str, ...] = ()
    ) -> None:
        if not secret:
            raise ValueError("the RPC secret must not be empty")
        self._secret = secret.encode()
        self._peer = peer_credential.encode() if peer_credential else None
        self._peer_methods = frozenset(peer_methods)

    def accepts(self, presented: str | None, method: str = "") -> bool:
        # Constant time: the secret cannot be learnt byte by byte from response times.
        if presented is None:
            return False
        if secrets.compare_digest(presented.encode(), self._secret):
            return True
        return (
            self._peer is not None
            and method in self._peer_methods
            and secrets.compare_digest(presented.encode(), self._peer)
        )

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None or details.method.startswith(OPEN_SERVICES):
            return handler
        presented = _presented_secret(details)
        if self.accepts(presented, details.method):
            return handler
        why = "missing credentials" if presented is None else "invalid credentials"
        return _refusal(handler, f"{why}: only the manager this worker registered with may call it")


def _refusal(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that aborts with UNAUTHENTICATED."""

    async def abort(_request, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def abort_stream(_request, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - makes this an async generator, as streaming handlers are

    wire = dict(
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort_stream, **wire)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(abort, **wire)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(abort_stream, **wire)
    return grpc.unary_unary_rpc_method_handler(abort, **wire)


def new_secret() -> str:
    return secrets.token_urlsafe(32)
