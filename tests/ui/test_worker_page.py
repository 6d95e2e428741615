"""The dashboard's load history and a worker's own page, in a real browser against a real
manager and worker: the Cluster page draws CPU history as heartbeats arrive, and a worker's
page shows its facts, its charts and its log lines, followed live."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support import wait_for

pytestmark = pytest.mark.browser

# One history point a second, so charts have points within seconds rather than a minute.
FAST_HISTORY = {"POPULACE_HISTORY_BUCKET_S": "1"}


@pytest.fixture(scope="module")
def manager(module_manager_factory):
    """One manager for the module's tests: the history test's worker is its only one, and an
    unknown worker's page only reads."""
    return module_manager_factory(extra_env=FAST_HISTORY).start()


def _points_at_least(page, test_id: str, n: int) -> None:
    page.wait_for_function(
        "([id, n]) => Number(document.querySelector(`[data-testid=${id}]`)?.dataset.points) >= n",
        arg=[test_id, n],
        timeout=30_000,
    )


def test_history_charts_and_a_workers_page_with_its_logs(
    page, manager, dashboard_built, screenshot
):
    manager.start_workers(procs=1)
    [worker] = wait_for(
        lambda: (ws := manager.workers(state="online")) and len(ws) == 1 and ws,
        30,
        what="a worker online",
    )

    page.goto(manager.url)
    page.get_by_label("API token").fill(manager.api_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Cluster")).to_be_visible()
    expect(page.get_by_role("heading", name="Load over time")).to_be_visible()
    _points_at_least(page, "cluster-history-cpu", 2)
    cpu = page.get_by_test_id("cluster-history-cpu")
    expect(cpu.locator("path.history-line")).to_have_attribute("d", re.compile(r"^M.* L"))
    expect(cpu.get_by_role("img")).to_have_attribute("aria-label", re.compile(r"\d+ points"))
    expect(page.get_by_test_id("cluster-history-rss")).to_contain_text("MiB")
    screenshot("cluster-history")

    # The worker's id in the table leads to its page.
    page.get_by_role("link", name=f"Worker {worker['id']}").click()
    expect(page).to_have_url(re.compile(rf"/workers/{worker['id']}$"))
    expect(page.get_by_role("heading", name=f"Worker {worker['id']}")).to_be_visible()
    facts = page.get_by_test_id("worker-facts")
    expect(facts).to_contain_text(worker["address"])
    expect(facts).to_contain_text(worker["node"])
    expect(facts).to_contain_text(worker["version"])
    _points_at_least(page, "worker-history-cpu", 2)
    _points_at_least(page, "worker-history-agents", 2)

    logs = page.get_by_test_id("worker-logs")
    expect(logs).to_contain_text(f"serving gRPC on {worker['address']}")
    expect(logs.locator("li").first).to_contain_text("INFO")
    page.evaluate("window.__noReload = true")

    # Followed live: a drain makes the worker log a line at its next beat.
    with manager.api() as api:
        assert api.post(f"/api/workers/{worker['id']}/drain").status_code == 200
    expect(logs).to_contain_text(f"manager reports worker {worker['id']} as draining")
    expect(facts).to_contain_text("draining")
    assert page.evaluate("window.__noReload") is True
    screenshot("worker-page")

    # A level filter reads again, leaving the INFO lines out.
    page.get_by_label("Log level").select_option("error")
    expect(page.get_by_text("No log lines at this level yet.")).to_be_visible()
    expect(page.get_by_test_id("worker-logs")).to_have_count(0)


def test_an_unknown_worker_has_a_clear_page(page, manager, dashboard_built):
    page.goto(f"{manager.url}/workers/4242#token={manager.api_token}")
    expect(page.get_by_role("alert")).to_contain_text("Worker 4242 does not exist")
