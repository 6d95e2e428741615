"""How the manager reaches a worker process: its address, the secret it accepts, TLS or not.

The registry is the only writer (at registration, and when the manager starts: from the store);
every WorkerClient reads from here, so call sites only ever name an address.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

# Big enough for a 10^5-agent batch with short personas; gRPC's default is 4 MiB.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


@dataclass(frozen=True)
class WorkerCredentials:
    secret: str
    tls: bool = False


class WorkerDirectory:
    """Credentials by address, plus the CA that workers' TLS certificates are checked against."""

    def __init__(self) -> None:
        self._by_address: dict[str, WorkerCredentials] = {}
        self._ca_pem: bytes | None = None

    def use_ca(self, ca_file: Path | None) -> None:
        """Trust workers' certificates signed by this CA (None: the system's roots)."""
        self._ca_pem = ca_file.read_bytes() if ca_file is not None else None

    def remember(self, address: str, credentials: WorkerCredentials) -> None:
        # The newest registration at an address wins: it proved it serves there.
        self._by_address[address] = credentials

    def credentials(self, address: str) -> WorkerCredentials | None:
        return self._by_address.get(address)

    def channel(self, address: str, tls: bool) -> grpc.aio.Channel:
        if not tls:
            return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        credentials = grpc.ssl_channel_credentials(root_certificates=self._ca_pem)
        return grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS)


# The manager process's directory (one per process, like its settings).
directory = WorkerDirectory()
