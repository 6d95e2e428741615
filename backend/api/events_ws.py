"""WS /ws/events: live events for the chosen topics.

The client authenticates in the Sec-WebSocket-Protocol header (see backend.events.socket_auth):
browsers cannot set an Authorization header on a websocket, and a token in the URL would be
written to every access log. The API token and the read-only viewer token are both accepted.

Protocol: the first message is `hello` (the current seq and the hub's `epoch`). A client that
reconnects passes `since=<last seq it saw>` (and the `epoch` from its hello); it then gets every
event it missed on its topics, in order, before the live ones, or one `resync` message when the
manager no longer holds them (it should refetch its snapshot over REST). Topics are `cluster`,
`population:<id>`, `simulation:<id>`, `sweep:<id>`, or `population:*` / `simulation:*` /
`sweep:*` for all of a kind.

Keep-alive: when nothing else was sent for PING_INTERVAL_S the server sends
`{"type": "ping", "topic": "system"}`, without a seq (so replay never sees it); the hello says
the interval. A client that hears nothing for about two intervals knows the socket is dead
(a laptop that went offline keeps a TCP connection "open" for minutes) and reconnects.
"""

from __future__ import annotations

import asyncio
import re

from fastapi import APIRouter, WebSocket, WebSocketDisconnect, status
from fastapi.responses import JSONResponse

from backend.auth import role_of
from backend.deps import runtime_of
from backend.events.catalog import Hello, Resync, system_message
from backend.events.hub import EventHub, Subscription
from backend.events.socket_auth import HOW_TO_AUTHENTICATE, PROTOCOL, token_from_subprotocols

router = APIRouter()
TOPIC = re.compile(r"^(cluster|(population|simulation|sweep):(\d+|\*))$")
PING_INTERVAL_S = 5.0
PING = system_message("ping")


def _auth_refusal(websocket: WebSocket) -> str | None:
    if "token" in websocket.query_params:
        return f"token in the URL refused: {HOW_TO_AUTHENTICATE}"
    token = token_from_subprotocols(websocket.scope.get("subprotocols", []))
    if token is None:
        return f"missing token: {HOW_TO_AUTHENTICATE}"
    if role_of(token, runtime_of(websocket).settings) is None:
        return "invalid API token"
    return None


async def _refuse(websocket: WebSocket, reason: str) -> None:
    """Refuse the handshake with HTTP 403 and the reason as JSON `detail`, where the server can
    answer a websocket with a plain HTTP response (uvicorn can); else close before accept (403)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"detail": reason}, status_code=403))
    else:
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION, reason=reason)


def _refuse_reason(topics: set[str], since: str | None) -> str | None:
    unknown = sorted(t for t in topics if not TOPIC.match(t))
    if not topics or unknown:
        return f"topics: unknown topics {unknown or '(none given)'}"
    if since is not None and not (since.isascii() and since.isdigit()):
        return f"since: expected a non-negative integer seq, got {since[:40]!r}"
    return None


@router.websocket("/ws/events")
async def events(
    websocket: WebSocket,
    topics: str = "cluster",
    since: str | None = None,
    epoch: str | None = None,
):
    refusal = _auth_refusal(websocket)
    if refusal is not None:
        await _refuse(websocket, refusal)
        return
    wanted = {t.strip() for t in topics.split(",") if t.strip()}
    reason = _refuse_reason(wanted, since)
    if reason is not None:
        await _refuse(websocket, reason)
        return
    hub: EventHub = runtime_of(websocket).hub
    since_seq = int(since) if since is not None else None
    sub = hub.subscribe(wanted, since=since_seq, epoch=epoch)
    hello_seq = hub.seq
    tasks: list[asyncio.Task] = []
    try:
        # Never the auth subprotocol: the token must not come back in the response headers.
        offered = websocket.scope.get("subprotocols", [])
        await websocket.accept(subprotocol=PROTOCOL if PROTOCOL in offered else None)
        receiver = asyncio.create_task(_drain_client(websocket))
        overflow = asyncio.create_task(sub.overflowed.wait())
        tasks += [receiver, overflow]
        await websocket.send_text(_hello(hub, sub, wanted, hello_seq, since_seq))
        await _send_missed(websocket, hub, sub, hello_seq, since_seq)
        getter: asyncio.Task | None = None
        while True:
            # One getter lives across pings: cancelling it could drop an event it just took.
            getter = getter or asyncio.create_task(sub.queue.get())
            done, _ = await asyncio.wait(
                {getter, receiver, overflow},
                timeout=PING_INTERVAL_S,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done:  # quiet: tell the client the socket still works
                await websocket.send_text(PING)
                continue
            if getter not in done:
                getter.cancel()
                break
            message, getter = getter.result(), None
            await websocket.send_text(message)
        if overflow.done():
            await websocket.close(code=status.WS_1013_TRY_AGAIN_LATER, reason="too slow; reconnect")
    except WebSocketDisconnect:
        pass
    finally:
        hub.unsubscribe(sub)
        for task in tasks:
            task.cancel()


def _hello(hub: EventHub, sub: Subscription, wanted: set[str], seq: int, since: int | None) -> str:
    hello = Hello(topics=sorted(wanted), epoch=hub.epoch, ping_interval_s=PING_INTERVAL_S)
    if since is not None:
        hello.since = since
        hello.replayed = None if sub.must_resync else len(sub.backlog)
    return system_message("hello", seq, hello)


async def _send_missed(
    websocket: WebSocket, hub: EventHub, sub: Subscription, seq: int, since: int | None
) -> None:
    if since is None:
        return
    if sub.must_resync:
        resync = Resync(
            since=since,
            oldest_buffered_seq=hub.oldest_buffered_seq,
            reason="the events since that seq are no longer held (or the manager restarted); "
            "refetch the snapshot",
        )
        await websocket.send_text(system_message("resync", seq, resync))
        return
    for message in sub.backlog:
        await websocket.send_text(message)
    sub.backlog = []  # sent: let the strings go


async def _drain_client(websocket: WebSocket) -> None:
    """Read (and ignore) what the client sends, so a disconnect is noticed promptly."""
    try:
        while True:
            await websocket.receive_text()
    except WebSocketDisconnect:
        return
