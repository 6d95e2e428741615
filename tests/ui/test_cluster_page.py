"""The dashboard in a real browser: sign in, watch workers come online and go offline live."""

from __future__ import annotations

import os
import re
import signal

from playwright.sync_api import expect

from tests.support import descendants, wait_for

pytestmark = __import__("pytest").mark.browser


def _row(page, address):
    return page.get_by_role("table", name="Workers").get_by_role("row", name=address, exact=True)


def test_wrong_token_shows_an_error_not_a_blank_page(page, manager, dashboard_built, screenshot):
    page.goto(manager.url)
    page.get_by_label("API token").fill("definitely-wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Invalid API token")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    screenshot("login-wrong-token")


def test_cluster_page_shows_workers_live(page, manager, dashboard_built, screenshot):
    page.goto(manager.url)
    page.get_by_label("API token").fill(manager.api_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Cluster")).to_be_visible()
    expect(page.get_by_role("status", name="Live updates")).to_have_text("live")
    # A marker that a reload or navigation would wipe out.
    page.evaluate("window.__noReload = true")

    doomed = manager.start_workers(procs=1, start_new_session=True)
    manager.start_workers(procs=1, env={"POPULACE_LABELS": "zone=a,gpu=a100"})
    workers = wait_for(
        lambda: (
            (ws := [w for w in manager.workers() if w["state"] == "online"]) and len(ws) == 2 and ws
        ),
        timeout=30,
        what="two workers online",
    )
    for worker in workers:
        row = _row(page, worker["address"])
        expect(row.get_by_role("cell", name="online", exact=True)).to_be_visible()
        expect(row).to_contain_text(worker["node"])
    labelled = [w for w in workers if w["labels"]]
    assert [w["labels"] for w in labelled] == [{"gpu": "a100", "zone": "a"}]
    expect(_row(page, labelled[0]["address"])).to_contain_text("gpu=a100, zone=a")
    expect(page.get_by_test_id("workers-online")).to_contain_text("2 of 2")
    screenshot("cluster-two-online")

    victim = next(w for w in workers if w["pid"] in descendants(doomed.pid))
    survivor = next(w for w in workers if w is not victim)
    os.killpg(doomed.pid, signal.SIGKILL)

    victim_row = _row(page, victim["address"])
    expect(victim_row.get_by_role("cell", name="offline", exact=True)).to_be_visible(timeout=8000)
    expect(
        _row(page, survivor["address"]).get_by_role("cell", name="online", exact=True)
    ).to_be_visible()
    expect(page.get_by_test_id("workers-online")).to_contain_text(re.compile(r"online\s*1 of 2"))
    assert page.evaluate("window.__noReload") is True, "the page reloaded instead of updating live"
    screenshot("cluster-one-offline")
