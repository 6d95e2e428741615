"""Reading request bodies into the API's one 422 format.

Config documents (POST /api/populations and /api/simulations) are read from the raw body, as
JSON or YAML; typed JSON bodies (the worker plane, resume) go through CheckedJsonRoute. Both get
the same limits and checks (backend.documents): strict UTF-8, bounded depth and size, finite
numbers, text without NUL, each refused with a 422 naming the field.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import ValidationError

from backend.documents import ConfigError, decode_document, load_json
from backend.errors import DomainError

Config = TypeVar("Config")
# Smaller bodies (heartbeats, a resume) are read on the event loop: a thread hop costs more.
INLINE_JSON_BYTES = 64 * 1024


def invalid_body(exc: ValidationError) -> RequestValidationError:
    """A pydantic error on the body as a 422 whose locs start with "body"."""
    return RequestValidationError(
        [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
    )


def unreadable_body(exc: ConfigError) -> RequestValidationError:
    return RequestValidationError(
        [{"type": e["type"], "loc": ("body", *e["loc"]), "msg": e["msg"]} for e in exc.errors()]
    )


# The media types a config document may be sent as (any charset parameter is ignored: the
# body must be UTF-8 whatever it says).
YAML_MEDIA_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
DOCUMENT_MEDIA_TYPES = ("application/json", *YAML_MEDIA_TYPES)


class UnsupportedMediaType(DomainError):
    """A config document sent as something other than JSON or YAML (text/plain, a form)."""

    http_status = 415


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_document_media_type(content_type: str | None) -> bool:
    media = _media_type(content_type)
    return media in DOCUMENT_MEDIA_TYPES or media.endswith(("+json", "+yaml"))


def require_document_media_type(request: Request) -> None:
    """415 unless the body says it is JSON or YAML: a body of another type (text/plain, a
    form) is not read as a config by guessing."""
    content_type = request.headers.get("content-type")
    if not is_document_media_type(content_type):
        said = f"Content-Type {_media_type(content_type)!r}" if content_type else "no Content-Type"
        raise UnsupportedMediaType(
            f"a config document must be sent as JSON (Content-Type: application/json) or YAML "
            f"(Content-Type: application/yaml); this request has {said}"
        )


async def read_config(request: Request, parse: Callable[[str], Config]) -> Config:
    """JSON, or YAML with Content-Type application/yaml (the dashboard's editor, CLI files);
    any other media type is a 415.

    Decoding, reading and validating run in a thread, so a large or hostile document never
    holds the event loop (heartbeats, /healthz) while it is read and refused.
    """
    require_document_media_type(request)
    raw = await request.body()
    try:
        return await asyncio.to_thread(lambda: parse(decode_document(raw)))
    except ConfigError as exc:
        raise unreadable_body(exc) from None
    except ValidationError as exc:
        raise invalid_body(exc) from None


class _CheckedJsonRequest(Request):
    """request.json() with the document checks; FastAPI reads typed bodies through it."""

    async def json(self) -> Any:
        if not hasattr(self, "_checked_json"):
            raw = await self.body()
            if len(raw) > INLINE_JSON_BYTES:
                self._checked_json = await asyncio.to_thread(load_json, raw)
            else:
                self._checked_json = load_json(raw)
        return self._checked_json


def _is_json(content_type: str | None) -> bool:
    media = _media_type(content_type)
    return media == "application/json" or media.endswith("+json")


class CheckedJsonRoute(APIRoute):
    """Reads a route's JSON body with the document checks before FastAPI parses it.

    FastAPI turns any error while parsing a body into a bare 400, so the body is read here
    first: a refusal is a 422 naming the field, and FastAPI then gets the value already read.
    """

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            request = _CheckedJsonRequest(request.scope, request.receive)
            # As FastAPI does: an empty body is no body (a route's optional body stays None).
            if _is_json(request.headers.get("content-type")) and await request.body():
                try:
                    await request.json()
                except ConfigError as exc:
                    raise unreadable_body(exc) from None
            return await handler(request)

        return checked
