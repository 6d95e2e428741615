"""Bearer-token checks: the API token for users, the join token for the worker plane.

Comparisons are constant-time so a token cannot be guessed byte by byte from response times.
The dependencies are `async def` although they do no I/O: FastAPI runs a plain `def` dependency
in its thread pool, a thread hop on every request.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

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


async def require_api_token(request: Request, credentials: BearerCredentials) -> None:
    _check(credentials, request.app.state.settings.api_token.get_secret_value(), "API token")


async def require_join_token(request: Request, credentials: BearerCredentials) -> None:
    _check(credentials, request.app.state.settings.join_token.get_secret_value(), "join token")
