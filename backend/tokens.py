"""API and join tokens: taken from the environment, else read from or generated into data_dir.

A generated token is written with mode 0600 and shown once, when it is created.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from backend.settings import ManagerSettings

TOKEN_FILES = {"api_token": "api_token", "join_token": "join_token"}


def _read_or_create(path: Path) -> tuple[str, bool]:
    if path.is_file():
        token = path.read_text().strip()
        if token:
            return token, False
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    # O_EXCL: two processes racing to create the file must not both win with different tokens.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip(), False
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token, True


def ensure_tokens(settings: ManagerSettings, announce=print) -> ManagerSettings:
    """Return settings with both tokens set, generating and announcing missing ones."""
    updates = {}
    for field, filename in TOKEN_FILES.items():
        if getattr(settings, field) is not None:
            continue
        path = settings.data_dir / filename
        token, created = _read_or_create(path)
        if created:
            label = field.replace("_", " ")
            announce(f"Generated a new {label}: {token}  (stored in {path})")
        updates[field] = SecretStr(token)
    return settings.model_copy(update=updates) if updates else settings
