"""/api/docs is the dashboard's docs page; FastAPI's usual doc paths and unknown /api paths
never answer with the dashboard's HTML."""

from __future__ import annotations

import httpx
import pytest

DASHBOARD = "<!doctype html><title>populace test dashboard</title>"


@pytest.fixture(scope="module")
def docs_manager(module_manager_factory, tmp_path_factory):
    """One manager for the module: every test only reads from it."""
    dist = tmp_path_factory.mktemp("dist")
    (dist / "index.html").write_text(DASHBOARD)
    return module_manager_factory(extra_env={"POPULACE_FRONTEND_DIST": str(dist)}).start()


def test_api_docs_is_the_dashboard_page(docs_manager):
    resp = httpx.get(f"{docs_manager.url}/api/docs", timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/html")
    assert resp.text == DASHBOARD


@pytest.mark.parametrize(
    "path,target",
    [("/docs", "/api/docs"), ("/redoc", "/api/docs"), ("/openapi.json", "/api/openapi.json")],
)
def test_fastapi_doc_paths_redirect_to_the_api(docs_manager, path, target):
    resp = httpx.get(docs_manager.url + path, timeout=10)
    assert resp.status_code == 307
    assert resp.headers["location"] == target
    assert DASHBOARD not in resp.text


def test_redirected_schema_still_needs_the_token(docs_manager):
    resp = httpx.get(docs_manager.url + "/openapi.json", follow_redirects=True, timeout=10)
    assert resp.status_code == 401
    assert "token" in resp.json()["detail"]
    with docs_manager.api() as api:
        schema = api.get("/openapi.json", follow_redirects=True).json()
    assert "/api/populations" in schema["paths"]


@pytest.mark.parametrize("path", ["/api/nope", "/api/docs/extra", "/api", "/ws/nope"])
def test_unknown_api_paths_are_json_404s(docs_manager, path):
    resp = httpx.get(docs_manager.url + path, timeout=10)
    assert resp.status_code == 404
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.json()["detail"] == f"no such route: {path}"
