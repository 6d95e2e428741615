"""Reading a config document from a request body, with the API's one 422 format."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from backend.documents import ConfigError

Config = TypeVar("Config")


def invalid_body(exc: ValidationError) -> RequestValidationError:
    """A pydantic error on the body as a 422 whose locs start with "body"."""
    return RequestValidationError(
        [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
    )


async def read_config(request: Request, parse: Callable[[str], Config]) -> Config:
    """JSON, or YAML with Content-Type application/yaml (the dashboard's editor, CLI files)."""
    raw = (await request.body()).decode("utf-8", errors="replace")
    try:
        return parse(raw)
    except ConfigError as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("body", exc.field), "msg": str(exc), "input": None}]
        ) from None
    except ValidationError as exc:
        raise invalid_body(exc) from None
