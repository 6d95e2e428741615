"""One error shape for every error: `{"detail": ...}`.

Refusals carry a sentence (`{"detail": "population 7 not found"}`); every 422 carries the array
FastAPI's HTTPValidationError declares, `[{"loc": [...], "msg": "...", "type": "..."}]`, whatever
refused the input (FastAPI's parameter checks, a config document, the input guards). The refused
input is not echoed back: it may hold a secret (an API key), or what JSON cannot carry (NaN,
bytes), which used to make the 422 itself fail with a 500.

The manager's parts refuse with backend.errors' kinds (NotFound, Forbidden, Gone, Conflict,
Invalid, Unavailable; e.g. the stores' Unknown* errors are NotFound): each becomes its status here, once,
as vLLM's OpenAI server maps its errors with app-level handlers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from backend.errors import DomainError, Invalid, InvalidFields

log = logging.getLogger(__name__)

VALIDATION_SCHEMA_REF = "#/components/schemas/HTTPValidationError"


class ErrorOut(BaseModel):
    detail: str = Field(description="what went wrong, in a sentence")


def _text(value: Any) -> str:
    # A lone surrogate (from a JSON "\ud800" escape) cannot be encoded as UTF-8.
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _loc_part(part: Any) -> str | int:
    return part if isinstance(part, int) and not isinstance(part, bool) else _text(part)


# A ctx value longer than this is not sent (it would only repeat the message).
MAX_CTX_TEXT = 200


def _plain_ctx(ctx: Any, msg: str) -> dict[str, Any]:
    """The error's bounds and choices (ge, le, min_length, expected, pattern): the values a
    client words a message with. Only plain, finite values; never an object, nor text that
    repeats the message (a check's own `reason`)."""
    if not isinstance(ctx, Mapping):
        return {}
    plain: dict[str, Any] = {}
    for key, value in ctx.items():
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
            plain[str(key)] = str(value)  # a JavaScript number would round it (a seed's bound)
        elif isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)):
            plain[str(key)] = value
        elif isinstance(value, str) and len(value) <= MAX_CTX_TEXT and value != msg:
            plain[str(key)] = _text(value)
    return plain


def validation_issues(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`[{"loc", "msg", "type", "ctx"?}]`, JSON-safe whatever the errors hold; `ctx` (pydantic's
    bounds and choices, as HTTPValidationError declares it) when the error has plain ones."""
    issues = []
    for error in errors:
        msg = _text(error.get("msg", ""))
        issue: dict[str, Any] = {
            "loc": [_loc_part(part) for part in error.get("loc", ())],
            "msg": msg,
            "type": _text(error.get("type", "value_error")),
        }
        ctx = _plain_ctx(error.get("ctx"), msg)
        if ctx:
            issue["ctx"] = ctx
        issues.append(issue)
    return issues


def invalid_input(loc: tuple[str | int, ...], msg: str, kind: str) -> RequestValidationError:
    """A 422 for one field, e.g. `invalid_input(("query", "attribute"), "...", "value_error")`."""
    return RequestValidationError([{"loc": loc, "msg": msg, "type": kind}])


def validation_response(issues: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": issues})


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    return validation_response(validation_issues(exc.errors()))


async def _refused(request: Request, exc: DomainError) -> JSONResponse:
    if isinstance(exc, Invalid):
        issue = {"loc": exc.loc, "msg": exc.detail, "type": "value_error"}
        return validation_response(validation_issues([issue]))
    if isinstance(exc, InvalidFields):
        return validation_response(validation_issues(exc.issues))
    return JSONResponse(
        status_code=exc.http_status, content={"detail": exc.detail}, headers=exc.headers
    )


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    # Starlette logs the traceback and re-raises after this answer; the client gets the shape.
    return JSONResponse(
        status_code=500, content={"detail": "internal error; the manager's log has the details"}
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(DomainError, _refused)
    app.add_exception_handler(Exception, _internal_error)


_DESCRIPTIONS = {
    401: "Missing or invalid bearer token",
    403: "The token may not do this (the viewer token only reads)",
    404: "No such item",
    409: "Not possible in the item's current state",
    410: "Gone (the worker was removed)",
    413: "Request body larger than the manager's max_body_bytes",
    422: "Invalid input; each entry names the field (loc) and the problem (msg)",
    503: "Try again shortly",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses, for a route's `responses=`."""
    responses: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        if code == 422:
            content = {"application/json": {"schema": {"$ref": VALIDATION_SCHEMA_REF}}}
            responses[code] = {"description": _DESCRIPTIONS[code], "content": content}
        else:
            responses[code] = {"model": ErrorOut, "description": _DESCRIPTIONS[code]}
    return responses
