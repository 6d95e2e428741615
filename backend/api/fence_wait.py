"""Requests that change something wait briefly while the manager takes its lease again.

A cut lease connection closes the write fence until the lease watch takes the lease on a new
connection (backend.db.lease), usually within one check. A POST that arrives in that moment
waits for it rather than failing with 503. Reads never wait (the fence does not stop them), nor
do heartbeats (kept in memory, and a late one could make a worker look slow), nor anything on a
manager that is stopping.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.db.write_fence import WriteFence

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class FenceWait:
    def __init__(self, app: ASGIApp, *, fence: WriteFence, timeout_s: float):
        self.app, self.fence, self.timeout_s = app, fence, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] not in READ_METHODS
            and not scope["path"].endswith("/heartbeat")
        ):
            await self.fence.wait_open(self.timeout_s)
        await self.app(scope, receive, send)
