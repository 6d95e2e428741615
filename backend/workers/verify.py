"""A registration is checked over gRPC before the manager places a single agent on it.

The registering process sends the secret its gRPC server accepts; the manager calls GetInfo at
the claimed address with that secret. Only the process that serves there can pass: a fake or
duplicate registration of someone else's address is refused, an unreachable address is
reported (the worker retries), and the capacity stored is what the process itself reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from backend.errors import Conflict, Forbidden, Unavailable
from backend.workers import registry
from backend.workers.channels import WorkerCredentials
from backend.workers.grpc_client import WorkerClient
from backend.workers.plane_errors import WorkerPlaneError, WorkerUnauthenticated
from backend.workers.schemas import RegisterRequest

if TYPE_CHECKING:
    from backend.workers.liveness import Liveness

# The worker's server is up before it registers; a registration must not hang for long.
VERIFY_TIMEOUT_S = 3.0


# How soon an unreachable worker is asked to register again (its Retry-After).
RETRY_AFTER_S = 2


class RegistrationRefused(Forbidden):
    """The process at the address is not the one registering."""


class AddressHeld(Conflict):
    """A refused registration of an address a live worker holds."""


class WorkerUnreachable(Unavailable):
    """The manager cannot reach the address over gRPC (the worker retries)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, retry_after_s=RETRY_AFTER_S)


@dataclass(frozen=True)
class Verified:
    # What the process itself reports it can hold: a claim in the body cannot exceed it.
    capacity: int


async def admit(session: AsyncSession, liveness: Liveness, req: RegisterRequest) -> Verified:
    """verify_registration, with a refusal of an address a live worker holds told as
    AddressHeld (a second process at the same address, not an impostor)."""
    try:
        return await verify_registration(req)
    except RegistrationRefused as exc:
        holder = await registry.live_holder_of_address(session, liveness, req.address)
        if holder is not None:
            raise AddressHeld(
                f"address {req.address} is held by live worker {holder.id}: {exc}"
            ) from None
        raise


async def verify_registration(req: RegisterRequest) -> Verified:
    where = f"{req.address} ({'TLS' if req.tls else 'plaintext'} gRPC)"
    try:
        async with WorkerClient(req.address, WorkerCredentials(req.rpc_secret, req.tls)) as client:
            info = await client.info(timeout=VERIFY_TIMEOUT_S)
    except WorkerUnauthenticated:
        raise RegistrationRefused(
            f"the process serving {where} does not accept this registration's rpc_secret: "
            "only the process serving an address can register it"
        ) from None
    except WorkerPlaneError as exc:
        raise WorkerUnreachable(
            f"the manager cannot reach {where}: {exc.status} {exc.message}".rstrip()
            + "; check the worker's --advertise-host, its TLS settings and firewalls"
        ) from None
    if info.pid != req.pid or info.node != req.node:
        raise RegistrationRefused(
            f"the process serving {req.address} is pid {info.pid} of node {info.node!r}, "
            f"not pid {req.pid} of node {req.node!r} as registered"
        )
    return Verified(capacity=min(req.capacity, info.capacity))
