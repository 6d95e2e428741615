"""The API docs page in a real browser: behind the sign-in, Swagger UI calls the API with the
token, and FastAPI's /docs leads there instead of to the dashboard."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def manager(module_manager_factory):
    """One manager for the module's tests: each only reads from it, in a browser context of
    its own."""
    return module_manager_factory().start()


def _sign_in(page, token):
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()


def _operation(page, method, path):
    """Swagger UI's block for one operation (its summary carries the path as data-path)."""
    return page.locator(f".opblock-{method}").filter(
        has=page.locator(f'.opblock-summary-path[data-path="{path}"]')
    )


def test_api_docs_need_the_token_and_try_it_out_sends_it(
    page, manager, dashboard_built, screenshot
):
    sent = []
    page.on("request", lambda request: sent.append(request))
    page.goto(f"{manager.url}/api/docs")
    # No token yet: the sign-in page, not the docs.
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    expect(page.get_by_test_id("swagger-ui")).to_have_count(0)

    _sign_in(page, manager.api_token)
    expect(page).to_have_url(re.compile(r"/api/docs$"))
    populations = _operation(page, "get", "/api/populations")
    expect(populations).to_be_visible(timeout=20_000)
    screenshot("api-docs")

    populations.locator(".opblock-summary").click()
    populations.get_by_role("button", name="Try it out").click()
    populations.get_by_role("button", name="Execute").click()
    status = populations.locator(".live-responses-table .response .response-col_status")
    expect(status.first).to_have_text("200", timeout=20_000)
    expect(populations.locator(".live-responses-table")).to_contain_text('"items"')

    calls = [r for r in sent if "/api/populations" in r.url]
    assert calls, [r.url for r in sent]
    assert calls[-1].headers["authorization"] == f"Bearer {manager.api_token}"
    # The schema, too, came with the token; the token was never in an address.
    schema = [r for r in sent if r.url.endswith("/api/openapi.json")]
    assert schema and schema[0].headers["authorization"] == f"Bearer {manager.api_token}"
    assert not [r.url for r in sent if manager.api_token in r.url]


def test_fastapi_docs_path_leads_to_the_api_docs(page, manager, dashboard_built):
    page.goto(f"{manager.url}/docs")
    expect(page).to_have_url(re.compile(r"/api/docs$"))
    _sign_in(page, manager.api_token)
    expect(_operation(page, "get", "/api/populations")).to_be_visible(timeout=20_000)
    # The docs page, not the dashboard's first page (Swagger's "cluster" tag is lower case).
    expect(page.get_by_role("heading", name="API", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Cluster", exact=True)).to_have_count(0)
    # The header links the docs like any other page, and back.
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="API")).to_have_attribute("aria-current", "page")
    nav.get_by_role("link", name="Cluster").click()
    expect(page.get_by_role("heading", name="Cluster", exact=True)).to_be_visible()
    nav.get_by_role("link", name="API").click()
    expect(page).to_have_url(re.compile(r"/api/docs$"))
    expect(_operation(page, "get", "/api/populations")).to_be_visible(timeout=20_000)
