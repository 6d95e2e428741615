"""What the dashboard's pages weigh in a real browser against a real manager serving the built
frontend/dist: the first page loads React, the shell and its own chunk only, every script comes
compressed and cached for a year, and Swagger UI is fetched on the API docs page alone.

The figures are printed (`pytest -s`): the JS the Cluster page loads, as decoded (what the
browser parses) and as sent (what crosses the network). Before route-level code splitting and
compression the Cluster page took 328,109 bytes of JS, all of it sent uncompressed."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

IMMUTABLE = "public, max-age=31536000, immutable"
# The Cluster page's JS before this change (index + jsx-runtime + StateBadge + rolldown
# runtime, uncompressed): what the figures below are compared with.
BEFORE_BYTES = 328_109


@pytest.fixture(scope="module")
def manager(module_manager_factory):
    """One manager for the module's tests: each only reads from it, in a browser context of
    its own (no cache carried over)."""
    return module_manager_factory().start()


@dataclass
class Script:
    url: str
    decoded: int
    sent: int
    encoding: str | None
    cache_control: str | None


def _record_scripts(page) -> list[Script]:
    scripts: list[Script] = []

    def on_finished(request):
        if request.resource_type != "script":
            return
        response = request.response()
        headers = response.all_headers()
        scripts.append(
            Script(
                url=request.url,
                decoded=len(response.body()),
                sent=request.sizes()["responseBodySize"],
                encoding=headers.get("content-encoding"),
                cache_control=headers.get("cache-control"),
            )
        )

    page.on("requestfinished", on_finished)
    return scripts


def _summary(name: str, scripts: list[Script], before: str = "") -> tuple[int, int]:
    decoded = sum(s.decoded for s in scripts)
    sent = sum(s.sent for s in scripts)
    print(
        f"\n{name}: {len(scripts)} scripts, {decoded:,} bytes of JS decoded, {sent:,} sent{before}"
    )
    for s in sorted(scripts, key=lambda s: -s.decoded):
        print(f"  {s.decoded:>9,} {s.sent:>9,} {s.encoding or '-':<5} {s.url.rsplit('/', 1)[-1]}")
    return decoded, sent


def test_the_first_page_loads_less_js_compressed_and_cached_for_good(
    page, manager, dashboard_built
):
    scripts = _record_scripts(page)
    page.goto(f"{manager.url}/#token={manager.api_token}")
    expect(page.get_by_role("heading", name="Cluster", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Load over time")).to_be_visible()
    page.wait_for_load_state("networkidle")

    decoded, sent = _summary(
        "Cluster page", scripts, f" (before: {BEFORE_BYTES:,} decoded and sent)"
    )
    names = [s.url.rsplit("/", 1)[-1] for s in scripts]
    assert any(n.startswith("ClusterPage-") for n in names), names
    # Other pages' chunks, the charts library and Swagger UI wait for their pages.
    for other in ("PopulationsPage-", "SimulationDetailPage-", "swagger-ui", "meters-"):
        assert not any(n.startswith(other) for n in names), (other, names)
    for script in scripts:
        assert script.cache_control == IMMUTABLE, script
        if script.decoded >= 1024:  # small chunks are not worth compressing
            assert script.encoding in ("br", "gzip"), script
            assert script.sent < script.decoded, script
    assert decoded < BEFORE_BYTES * 0.85, decoded
    assert sent < BEFORE_BYTES / 3, sent


def test_swagger_ui_is_fetched_on_the_api_docs_page_only(page, manager, dashboard_built):
    scripts = _record_scripts(page)
    page.goto(f"{manager.url}/#token={manager.api_token}")
    expect(page.get_by_role("heading", name="Load over time")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert not [s for s in scripts if "swagger-ui" in s.url]

    page.get_by_role("navigation", name="Main").get_by_role("link", name="API").click()
    expect(page).to_have_url(re.compile(r"/api/docs$"))
    expect(page.locator(".opblock-summary-path").first).to_be_visible(timeout=20_000)
    [swagger] = [s for s in scripts if "swagger-ui-bundle" in s.url]
    assert swagger.encoding in ("br", "gzip") and swagger.cache_control == IMMUTABLE
    assert swagger.sent < swagger.decoded / 3, swagger
    _summary("API docs page (after the Cluster page)", scripts)
