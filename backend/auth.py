"""Bearer-token checks: the API token for operators, the viewer token for reading, the join
token for the worker plane.

Comparisons are constant-time so a token cannot be guessed byte by byte from response times.
The dependencies are `async def` although they do no I/O: FastAPI runs a plain `def` dependency
in its thread pool, a thread hop on every request.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from backend.deps import runtime_of
from backend.settings import ManagerSettings

_bearer = HTTPBearer(auto_error=False)
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def tokens_match(given: str | None, expected: str) -> bool:
    if not given:
        return False
    return secrets.compare_digest(given.encode(), expected.encode())


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, detail=detail, headers={"WWW-Authenticate": "Bearer"}
    )


def _check(credentials: HTTPAuthorizationCredentials | None, expected: str, what: str) -> None:
    if credentials is None or not credentials.credentials:
        raise _unauthorized(f"missing bearer token: send 'Authorization: Bearer <{what}>'")
    if not tokens_match(credentials.credentials, expected):
        raise _unauthorized(f"invalid {what}")


# Methods a viewer may call: reading never changes anything.
READ_METHODS = frozenset({"GET", "HEAD"})
VIEWER_READ_ONLY = "the viewer token is read-only"


def role_of(token: str | None, settings: ManagerSettings) -> str | None:
    """`operator` for the API token, `viewer` for the viewer token (when one is set), else None."""
    if tokens_match(token, settings.api_token.get_secret_value()):
        return "operator"
    viewer = settings.viewer_token
    if viewer is not None and tokens_match(token, viewer.get_secret_value()):
        return "viewer"
    return None


async def require_api_token(request: Request, credentials: BearerCredentials) -> None:
    """The operator's API token, or the viewer token on a read (GET); the role is kept in
    request.state.role. Deciding here, by method, keeps every route free of role checks."""
    if credentials is None or not credentials.credentials:
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <API token>'")
    role = role_of(credentials.credentials, runtime_of(request).settings)
    if role is None:
        raise _unauthorized("invalid API token")
    if role == "viewer" and request.method not in READ_METHODS:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail=VIEWER_READ_ONLY)
    request.state.role = role


async def require_metrics_token(request: Request, credentials: BearerCredentials) -> None:
    """GET /api/metrics: the API or viewer token, or the metrics token, which reads nothing else."""
    if credentials is None or not credentials.credentials:
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <metrics token>'")
    settings = runtime_of(request).settings
    if role_of(credentials.credentials, settings) is not None:
        return
    metrics = settings.metrics_token
    if metrics is None or not tokens_match(credentials.credentials, metrics.get_secret_value()):
        raise _unauthorized("invalid metrics token")


async def require_join_token(request: Request, credentials: BearerCredentials) -> None:
    _check(credentials, runtime_of(request).settings.join_token.get_secret_value(), "join token")
