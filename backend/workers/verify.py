"""A registration is checked over gRPC before the manager places a single agent on it.

The registering process sends the secret its gRPC server accepts; the manager calls GetInfo at
the claimed address with that secret. Only the process that serves there can pass: a fake or
duplicate registration of someone else's address is refused, an unreachable address is
reported (the worker retries), and the capacity stored is what the process itself reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from backend.workers.channels import WorkerCredentials
from backend.workers.grpc_client import WorkerClient
from backend.workers.schemas import RegisterRequest

# The worker's server is up before it registers; a registration must not hang for long.
VERIFY_TIMEOUT_S = 3.0


class RegistrationRefused(Exception):
    """The process at the address is not the one registering (status 403)."""


class WorkerUnreachable(Exception):
    """The manager cannot reach the address over gRPC (status 503: the worker retries)."""


@dataclass(frozen=True)
class Verified:
    # What the process itself reports it can hold: a claim in the body cannot exceed it.
    capacity: int


async def verify_registration(req: RegisterRequest) -> Verified:
    where = f"{req.address} ({'TLS' if req.tls else 'plaintext'} gRPC)"
    try:
        async with WorkerClient(req.address, WorkerCredentials(req.rpc_secret, req.tls)) as client:
            info = await client.info(timeout=VERIFY_TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
            raise RegistrationRefused(
                f"the process serving {where} does not accept this registration's rpc_secret: "
                "only the process serving an address can register it"
            ) from None
        raise WorkerUnreachable(
            f"the manager cannot reach {where}: {exc.code().name} {exc.details() or ''}".rstrip()
            + "; check the worker's --advertise-host, its TLS settings and firewalls"
        ) from None
    if info.pid != req.pid or info.node != req.node:
        raise RegistrationRefused(
            f"the process serving {req.address} is pid {info.pid} of node {info.node!r}, "
            f"not pid {req.pid} of node {req.node!r} as registered"
        )
    return Verified(capacity=min(req.capacity, info.capacity))
