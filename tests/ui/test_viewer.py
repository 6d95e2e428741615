"""Signed in with the viewer token, the dashboard shows everything live and offers no action:
no launch, delete, drain, remove, repair, pause, resume or cancel."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.support_populations import deploy_population, population_yaml

pytestmark = pytest.mark.browser

# The integration test's population, under a name of its own.
CONFIG = population_yaml("roles", name="viewed")
ACTIONS = (
    "New population",
    "New simulation",
    "Delete population",
    "Repair",
    "Drain",
    "Remove agents",
    "Remove",
    "Pause",
    "Resume",
    "Cancel simulation",
    "Delete simulation",
)


def _no_actions(page) -> None:
    for name in ACTIONS:
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    expect(page.get_by_role("link", name="New simulation")).to_have_count(0)
    expect(page.get_by_role("link", name="Launch a simulation")).to_have_count(0)


def _deployed_with_a_simulation(manager) -> tuple[int, int]:
    manager.start_workers(procs=1)
    wait_for(lambda: manager.workers(state="online"), 60, what="a worker online")
    with manager.api() as api:
        pid = deploy_population(api, CONFIG)["id"]
        config = {
            "population_id": pid,
            "name": "viewed run",
            "rounds": 1,
            "policy": {"kind": "level_k"},
            "seed": 1,
        }
        sid = api.post("/api/simulations", json=config).json()["id"]
        wait_for(lambda: api.get(f"/api/simulations/{sid}").json()["status"] == "completed", 60)
    return pid, sid


def test_a_viewer_sees_everything_and_no_action(page, manager, dashboard_built, screenshot):
    pid, sid = _deployed_with_a_simulation(manager)
    page.goto(manager.url)
    page.get_by_label("API token").fill(manager.viewer_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Cluster")).to_be_visible()
    # The role is known (GET /api/info said so) before we look for what is missing.
    expect(page.get_by_text("read-only", exact=True)).to_be_visible()
    # The websocket takes the viewer token too.
    expect(page.get_by_role("status", name="Live updates")).to_have_text("live")
    workers = page.get_by_role("table", name="Workers")
    expect(workers.get_by_role("cell", name="online", exact=True)).to_be_visible()
    expect(workers.get_by_role("columnheader", name="Actions")).to_have_count(0)
    _no_actions(page)
    screenshot("viewer-cluster")

    for path, heading in (
        ("/populations", "Populations"),
        (f"/populations/{pid}", "viewed"),
        ("/simulations", "Simulations"),
        ("/simulations?launch", "Simulations"),
        (f"/simulations/{sid}", "viewed run"),
    ):
        page.goto(manager.url + path)
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        expect(page.get_by_role("status", name="Live updates")).to_have_text("live")
        _no_actions(page)
    # The data is all there: the rounds of the simulation, the population's agents.
    expect(page.get_by_test_id("current-round")).to_contain_text("1")
    page.goto(f"{manager.url}/populations/{pid}")
    expect(page.get_by_test_id("agents-stored")).to_contain_text("40")
    expect(page.get_by_role("textbox", name="Population config (YAML)")).to_have_count(0)
    screenshot("viewer-population")

    # The operator, on the same pages, gets the actions back.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API token").fill(manager.api_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="viewed")).to_be_visible()
    expect(page.get_by_role("button", name="Delete population")).to_be_visible()
    expect(page.get_by_text("read-only", exact=True)).to_have_count(0)
