"""How a client authenticates on WS /ws/events: in the `Sec-WebSocket-Protocol` header.

A browser cannot set an Authorization header on a websocket, but it can offer subprotocols
(`new WebSocket(url, protocols)`), and unlike a query parameter that header is not written to
access logs, proxies' logs or the browser history. The client offers two subprotocols:

    populace.v1
    populace.auth.<the token, base64url without padding>

and the server accepts with `populace.v1`; it never echoes the auth one back. base64url keeps any
token within the characters a subprotocol may use.

Standard library only: the CLI, the benchmarks and the tests import it as clients.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import urlencode

PROTOCOL = "populace.v1"
AUTH_PREFIX = "populace.auth."
HOW_TO_AUTHENTICATE = (
    f"offer the subprotocols '{PROTOCOL}' and '{AUTH_PREFIX}<base64url(token), no padding>' "
    "(Sec-WebSocket-Protocol); a token in the URL is not accepted"
)


def auth_subprotocols(token: str) -> list[str]:
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return [PROTOCOL, AUTH_PREFIX + encoded]


def token_from_subprotocols(offered: list[str]) -> str | None:
    """The token a client offered, or None when it offered none (or a malformed one)."""
    for protocol in offered:
        if not protocol.startswith(AUTH_PREFIX):
            continue
        encoded = protocol.removeprefix(AUTH_PREFIX)
        try:
            return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
    return None


def events_url(manager_url: str, **params: str | int) -> str:
    """ws(s)://.../ws/events?topics=... for a manager's http(s) base URL."""
    base = manager_url.rstrip("/").replace("http", "ws", 1)
    return f"{base}/ws/events?{urlencode(params)}" if params else f"{base}/ws/events"


def connect_events(manager_url: str, token: str, open_timeout: float = 10, **params: str | int):
    """A websockets sync client connection to /ws/events, authenticated as above."""
    from websockets.sync.client import connect

    from backend.client_tls import manager_ssl_context

    url = events_url(manager_url, **params)
    return connect(
        url,
        subprotocols=auth_subprotocols(token),  # type: ignore[arg-type]
        open_timeout=open_timeout,
        # wss: the manager's certificate is checked against POPULACE_TLS_CA (or system roots).
        ssl=manager_ssl_context() if url.startswith("wss://") else None,
    )
