"""API and join tokens: taken from the environment, else read from or generated into data_dir.
The optional viewer token likewise, but generated only on request (`populace tokens viewer`).

A generated token is written with mode 0600 and shown once, when it is created.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from backend.settings import ManagerSettings

TOKEN_FILES = {"api_token": "api_token", "join_token": "join_token"}
VIEWER_TOKEN_FILE = "viewer_token"
# Read-only for GET /api/metrics only (Prometheus's credentials_file); made by
# `populace tokens metrics`.
METRICS_TOKEN_FILE = "metrics_token"
OPTIONAL_TOKEN_FILES = {"viewer_token": VIEWER_TOKEN_FILE, "metrics_token": METRICS_TOKEN_FILE}


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
    # The viewer and metrics tokens are optional: used when `populace tokens viewer` (or
    # `metrics`) made one, never generated here.
    for field, filename in OPTIONAL_TOKEN_FILES.items():
        path = settings.data_dir / filename
        if getattr(settings, field) is None and path.is_file():
            token = path.read_text().strip()
            if token:
                updates[field] = SecretStr(token)
    return settings.model_copy(update=updates) if updates else settings


def _optional_token(settings: ManagerSettings, field: str) -> tuple[str, Path | None, bool]:
    if getattr(settings, field) is not None:
        return getattr(settings, field).get_secret_value(), None, False
    path = settings.data_dir / OPTIONAL_TOKEN_FILES[field]
    token, created = _read_or_create(path)
    return token, path, created


def viewer_token(settings: ManagerSettings) -> tuple[str, Path | None, bool]:
    """The read-only viewer token: (token, the file it is in or None when from the environment,
    whether it was just created). Created in data_dir with mode 0600 when there is none."""
    return _optional_token(settings, "viewer_token")


def metrics_token(settings: ManagerSettings) -> tuple[str, Path | None, bool]:
    """The metrics token (GET /api/metrics only), like viewer_token."""
    return _optional_token(settings, "metrics_token")
