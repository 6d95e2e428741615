"""Refuses NUL characters (%00) in a request's path and query parameters with a 422.

Postgres cannot store or compare text with NUL, and file paths cannot hold it: a NUL that got
through would be a 500 from the database or the filesystem. Checked once here, before routing,
for every route (bodies are checked where they are read: backend.documents).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api.errors import validation_response

NUL = "\x00"
MESSAGE = "NUL characters (\\u0000, %00) are not allowed"


class NulGuard:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            issues = _nul_issues(scope)
            if issues:
                await validation_response(issues)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _nul_issues(scope: Scope) -> list[dict]:
    issues = []
    if NUL in scope["path"]:
        issues.append({"loc": ["path"], "msg": f"{MESSAGE} in the path", "type": "nul_character"})
    query = scope.get("query_string", b"")
    if b"%00" in query or b"\x00" in query:
        # Decoded as Starlette decodes query parameters.
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if NUL in name or NUL in value:
                issues.append(
                    {
                        "loc": ["query", name.replace(NUL, "\\u0000")],
                        "msg": f"{MESSAGE} in query parameters",
                        "type": "nul_character",
                    }
                )
    return issues
