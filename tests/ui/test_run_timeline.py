"""A run's timeline on the simulation page: launched, rounds arriving live with the run's pace,
and a cancel with the reason the operator typed."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.ui.support import deploy_education_study, sign_in

pytestmark = pytest.mark.browser

REASON = "the prompt had a typo"


def test_the_timeline_shows_rounds_live_and_a_cancel_with_its_reason(
    page, manager, dashboard_built, screenshot
):
    pid = deploy_education_study(manager)
    with manager.api() as api:
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": pid,
                "rounds": 200,
                "policy": {"kind": "synthetic", "latency_s": 0.3},
            },
        )
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
    sign_in(page, manager)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Simulations").click()
    page.get_by_role("row", name=f"Simulation {sid}", exact=True).get_by_role("link").first.click()
    main = page.get_by_role("main")
    timeline = page.get_by_test_id("run-timeline")
    expect(timeline.get_by_role("heading", name="Timeline")).to_be_visible(timeout=30_000)
    expect(timeline.get_by_text("launched: 200 rounds")).to_be_visible(timeout=30_000)
    # Rounds arrive as they finish, and with two of them the page knows the run's pace.
    expect(timeline.get_by_text(re.compile(r"^round 2 of 200 finished: mean"))).to_be_visible(
        timeout=30_000
    )
    expect(page.get_by_test_id("run-pace")).to_contain_text(
        re.compile(r"rounds/min \(about .+ left\)"), timeout=30_000
    )

    page.get_by_role("button", name="Cancel simulation").click()
    dialog = page.get_by_role("dialog", name=f"Cancel simulation {sid}?")
    dialog.get_by_label("Reason (optional, shown with the run)").fill(REASON)
    dialog.get_by_role("button", name="Cancel simulation").click()
    expect(main.get_by_text("cancelled", exact=True)).to_be_visible(timeout=30_000)
    # The newest entry first: the cancel, with the operator's words.
    newest = timeline.get_by_test_id("timeline-entry").first
    expect(newest).to_contain_text(f"cancelled: {REASON}", timeout=30_000)
    expect(newest.locator("time")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    expect(page.get_by_test_id("run-pace")).to_have_count(0)  # not running any more
    screenshot("run-timeline-cancelled")

    # A fresh load shows the same stored timeline.
    page.reload()
    expect(timeline.get_by_test_id("timeline-entry").first).to_contain_text(
        f"cancelled: {REASON}", timeout=30_000
    )
    expect(timeline.get_by_text("launched: 200 rounds")).to_be_visible()
    with manager.api() as api:
        stored = api.get(f"/api/simulations/{sid}/timeline").json()["items"]
    assert stored[0]["message"] == "launched: 200 rounds"
    assert stored[-1]["message"] == f"cancelled: {REASON}"
