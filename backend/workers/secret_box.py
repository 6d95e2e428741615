"""Worker RPC secrets at rest: sealed with a key that only the manager holds.

A worker process's RPC secret lets whoever holds it drive that process (create and delete
agents, play rounds, read its logs). The store keeps it sealed: AES-GCM under a key derived
from the manager's worker secret key, bound to the worker's address and TLS setting. A database
reader (a backup, a replica, a leaked dump) learns nothing it could use; a database writer who
points a row at another address gets a secret that no longer opens there, so the manager asks
that worker to register again instead of sending its secret to the new address.

The key comes from POPULACE_WORKER_SECRET_KEY, else from data_dir/worker_secret_key, generated
with mode 0600 on first use (like the tokens, backend.tokens). A manager restarted with the same
data dir (or variable) opens what it sealed and calls its workers at once; one with another key
cannot, and its workers are asked to register again (backend.workers.registry.load_directory).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from backend.settings import ManagerSettings

KEY_FILE = "worker_secret_key"
# A sealed secret: this prefix, then base64url(nonce + ciphertext + tag).
SEALED_PREFIX = "v1:"
NONCE_BYTES = 12
# Separates this key's use from any other a future version derives from the same material.
_KDF_INFO = b"populace worker rpc secrets v1"


def read_or_create_key(path: Path) -> str:
    """The key material in path, created (mode 0600, never replaced) when there is none."""
    if path.is_file():
        key = path.read_text().strip()
        if key:
            return key
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(32)
    # O_EXCL: two processes racing to create the key must not both win with different keys.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


def manager_key(settings: ManagerSettings) -> str:
    if settings.worker_secret_key is not None:
        return settings.worker_secret_key.get_secret_value()
    return read_or_create_key(settings.data_dir / KEY_FILE)


def _binding(address: str, tls: bool) -> bytes:
    """What a sealed secret is bound to: it opens only for the same address and TLS setting."""
    return f"{address}\n{'tls' if tls else 'plaintext'}".encode()


class SecretBox:
    def __init__(self, key_material: str) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_KDF_INFO).derive(
            key_material.encode()
        )
        self._aead = AESGCM(key)

    def seal(self, secret: str, address: str, tls: bool) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode(), _binding(address, tls))
        return SEALED_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, sealed: str | None, address: str, tls: bool) -> str | None:
        """The secret, or None when it was sealed with another key, for another address, or
        not sealed at all."""
        if not sealed or not sealed.startswith(SEALED_PREFIX):
            return None
        try:
            raw = base64.urlsafe_b64decode(sealed[len(SEALED_PREFIX) :].encode())
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _binding(address, tls))
            return plain.decode()
        except (InvalidTag, ValueError, binascii.Error):
            return None


class _ProcessBox:
    """The manager process's box, its key read when first needed (so an app that is built but
    never run, e.g. for its OpenAPI document, writes nothing)."""

    def __init__(self) -> None:
        self._settings: ManagerSettings | None = None
        self._box: SecretBox | None = None

    def configure(self, settings: ManagerSettings) -> None:
        self._settings, self._box = settings, None

    def get(self) -> SecretBox:
        if self._box is None:
            # Not configured (manager code driven in a test process): a key for this process's
            # lifetime only.
            material = (
                manager_key(self._settings)
                if self._settings is not None
                else secrets.token_urlsafe(32)
            )
            self._box = SecretBox(material)
        return self._box


box = _ProcessBox()
