"""WS /ws/events: live events for the chosen topics, authenticated by ?token=.

Browsers cannot set headers on a websocket, hence the query parameter.
"""

from __future__ import annotations

import asyncio
import json

from fastapi import APIRouter, WebSocket, WebSocketDisconnect, status

from backend.auth import tokens_match

router = APIRouter()
KNOWN_TOPIC_PREFIXES = ("cluster", "population:", "simulation:")


@router.websocket("/ws/events")
async def events(websocket: WebSocket, token: str | None = None, topics: str = "cluster"):
    settings = websocket.app.state.settings
    if not tokens_match(token, settings.api_token.get_secret_value()):
        # Closing before accept refuses the handshake (HTTP 403 to the client).
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION, reason="invalid API token")
        return
    wanted = {t.strip() for t in topics.split(",") if t.strip()}
    unknown = sorted(t for t in wanted if not t.startswith(KNOWN_TOPIC_PREFIXES))
    if not wanted or unknown:
        await websocket.close(
            code=status.WS_1008_POLICY_VIOLATION,
            reason=f"unknown topics: {unknown or '(none given)'}",
        )
        return
    hub = websocket.app.state.hub
    sub = hub.subscribe(wanted)
    await websocket.accept()
    receiver = asyncio.create_task(_drain_client(websocket))
    overflow = asyncio.create_task(sub.overflowed.wait())
    try:
        hello = {
            "type": "hello",
            "topic": "system",
            "seq": hub.seq,
            "payload": {"topics": sorted(wanted)},
        }
        await websocket.send_text(json.dumps(hello))
        while True:
            getter = asyncio.create_task(sub.queue.get())
            done, _ = await asyncio.wait(
                {getter, receiver, overflow}, return_when=asyncio.FIRST_COMPLETED
            )
            if getter not in done:
                getter.cancel()
                break
            await websocket.send_text(getter.result())
        if overflow.done():
            await websocket.close(code=status.WS_1013_TRY_AGAIN_LATER, reason="too slow; reconnect")
    except WebSocketDisconnect:
        pass
    finally:
        hub.unsubscribe(sub)
        receiver.cancel()
        overflow.cancel()


async def _drain_client(websocket: WebSocket) -> None:
    """Read (and ignore) what the client sends, so a disconnect is noticed promptly."""
    try:
        while True:
            await websocket.receive_text()
    except WebSocketDisconnect:
        return
