"""A cap on request body size, enforced while the body streams in.

Pure ASGI, so nothing is buffered past the cap: a Content-Length over it is refused before a
byte of the body is read, and a body without one (chunked) is counted as it arrives and refused
as soon as it goes over. The server discards whatever the client still sends.
"""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """An HTTPException, so FastAPI's own body reading passes it on unchanged (it turns other
    errors into a 400) and the app's handler answers it in the one error shape."""

    def __init__(self, limit: int, size: int | None = None, setting: str = "max_body_bytes"):
        got = f" ({size} bytes)" if size is not None else ""
        super().__init__(
            413,
            f"request body too large{got}: this manager accepts at most {limit} bytes "
            f"(setting {setting}, POPULACE_{setting.upper()})",
        )


# Uploads (edge lists, node tables: gigabytes) stream to disk under a limit of their own.
UPLOADS = ("POST", "/api/uploads")


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, max_upload_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes or max_bytes

    def _limit(self, scope: Scope) -> tuple[int, str]:
        if (scope.get("method"), scope.get("path", "").rstrip("/")) == UPLOADS:
            return self.max_upload_bytes, "max_upload_bytes"
        return self.max_bytes, "max_body_bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self._limit(scope)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _refuse(BodyTooLarge(limit, declared, setting), scope, receive, send)
            return

        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit, setting=setting)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge as exc:
            # Normally answered by the app's handler; this catches a read outside a route.
            if started:
                raise
            await _refuse(exc, scope, receive, send)


async def _refuse(exc: BodyTooLarge, scope: Scope, receive: Receive, send: Send) -> None:
    response = JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
    await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    value = Headers(scope=scope).get("content-length")
    return int(value) if value is not None and value.isdigit() else None
