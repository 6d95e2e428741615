"""Every /api and /ws route rejects a missing and a wrong token; only /healthz is open.
(What the viewer token may do is in test_roles_and_secrets.)"""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi.routing import APIRoute, APIWebSocketRoute
from pydantic import SecretStr
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from backend.app import ROUTERS, create_app
from backend.events.socket_auth import auth_subprotocols
from backend.settings import ManagerSettings

WORKER_PLANE = re.compile(r"^/api/workers/(register|\{worker_id\}/(heartbeat|deregister))$")


def _routes():
    """Every route of every router the app includes (the app's own list is private API)."""
    http, ws = [], []
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.path.startswith("/api"):
                http += [(m, route.path) for m in sorted(route.methods - {"HEAD", "OPTIONS"})]
            elif isinstance(route, APIWebSocketRoute):
                ws.append(route.path)
    return http, ws


HTTP_ROUTES, WS_ROUTES = _routes()


def test_route_inventory_is_what_we_expect():
    # The app's OpenAPI schema must not list a route the routers above do not have.
    app = create_app(ManagerSettings(api_token=SecretStr("x"), join_token=SecretStr("y")))
    in_schema = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    assert in_schema - {("GET", "/healthz")} <= set(HTTP_ROUTES)
    assert len(HTTP_ROUTES) >= 9
    assert ("POST", "/api/workers/register") in HTTP_ROUTES
    assert WS_ROUTES == ["/ws/events"]


@pytest.mark.parametrize("method,path", HTTP_ROUTES, ids=[f"{m} {p}" for m, p in HTTP_ROUTES])
def test_http_route_rejects_missing_and_wrong_token(shared_manager, method, path):
    url = shared_manager.url + path.replace("{worker_id}", "1")
    # The *other* plane's token is also a wrong token here.
    other = shared_manager.api_token if WORKER_PLANE.match(path) else shared_manager.join_token
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {other}"}):
        resp = httpx.request(method, url, headers=headers, json={}, timeout=10)
        assert resp.status_code == 401, (headers, resp.text)
        assert resp.headers["content-type"].startswith("application/json")
        assert "token" in resp.json()["detail"]


@pytest.mark.parametrize("path", WS_ROUTES)
def test_websocket_rejects_missing_and_wrong_token(shared_manager, path):
    base = shared_manager.url.replace("http", "ws") + path + "?topics=cluster"
    wrong = (
        None,
        ["populace.v1"],
        auth_subprotocols("wrong"),
        auth_subprotocols(shared_manager.join_token),
        ["populace.v1", "populace.auth.!!not-base64"],
    )
    for offered in wrong:
        with pytest.raises(InvalidStatus) as err, connect(base, subprotocols=offered):
            pass
        assert err.value.response.status_code == 403
    # The right token, but in the URL: refused too (it would be written to access logs).
    with pytest.raises(InvalidStatus) as err, connect(f"{base}&token={shared_manager.api_token}"):
        pass
    assert err.value.response.status_code == 403
    offered = auth_subprotocols(shared_manager.api_token)
    with connect(base, subprotocols=offered, open_timeout=5) as ws:
        assert '"hello"' in ws.recv(timeout=5)


def test_healthz_is_open(shared_manager):
    assert httpx.get(shared_manager.url + "/healthz").json() == {"status": "ok"}
