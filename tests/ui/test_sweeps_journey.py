"""A sweep launched from the dashboard: a bad grid is refused at its line, a 2x2 grid runs,
and the results table fills in live with each run's final mean."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.ui.support import deploy_education_study, sign_in

pytestmark = pytest.mark.browser

SWEEP = """name: rule-by-seed
mode: sequence
populations: [{pid}]
base:
  rounds: 3
  policy: {{kind: synthetic, latency_s: {latency}}}
grid:
  rule: [{{preset: "2/3"}}, {{preset: "1/2+5"}}]
  seed: [{seeds}]
"""


def test_a_sweep_from_the_dashboard_fills_its_results_table(
    page, manager, dashboard_built, screenshot
):
    pid = deploy_education_study(manager)
    sign_in(page, manager)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sweeps").click()
    expect(page.get_by_role("heading", name="Sweeps", exact=True)).to_be_visible()
    page.get_by_role("button", name="New sweep").click()
    editor = page.get_by_label("Sweep file (YAML)")

    # A repeated seed is refused at its line, before anything runs.
    editor.fill(SWEEP.format(pid=pid, latency=0.2, seeds="1, 1"))
    page.get_by_role("button", name="Launch sweep").click()
    errors = page.locator(".editor-errors")
    # The summary at the top of the form takes the focus, each problem with its line.
    expect(errors).to_be_focused()
    expect(errors).to_contain_text("this value appears twice")
    expect(editor).to_have_attribute("aria-invalid", "true")
    with manager.api() as api:
        assert api.get("/api/sweeps").json()["items"] == []

    editor.fill(SWEEP.format(pid=pid, latency=0.2, seeds="1, 2"))
    page.get_by_role("button", name="Launch sweep").click()
    expect(page).to_have_url(f"{manager.url}/sweeps/1")
    expect(page.get_by_role("heading", name="rule-by-seed")).to_be_visible()
    table = page.get_by_role("table", name="Results")
    expect(table.get_by_role("row")).to_have_count(5)  # a header and 4 points
    # The table fills in from the sweep's events: every run ends completed.
    progress = page.get_by_label("Sweep progress")
    expect(progress).to_have_text("4 of 4 runs finished", timeout=120_000)
    expect(page.locator(".page-title .badge")).to_have_text("completed")

    with manager.api() as api:
        rows = api.get("/api/sweeps/1").json()["results"]["items"]
    assert [r["status"] for r in rows] == ["completed"] * 4
    for r in rows:
        row = table.get_by_role("row", name=f"Point {r['point']}")
        expect(row.locator('[data-column="final-mean"]')).to_have_text(
            f"{r['final_mean']:,.2f}".rstrip("0").rstrip(".")
        )
        expect(row.get_by_role("link", name=str(r["simulation_id"]))).to_have_attribute(
            "href", f"/simulations/{r['simulation_id']}"
        )
    ids = ",".join(str(r["simulation_id"]) for r in rows)
    expect(page.get_by_role("link", name="Compare runs")).to_have_attribute(
        "href", f"/compare?ids={ids}"
    )
    screenshot("sweep-results")

    page.get_by_role("link", name="Sweeps", exact=True).first.click()
    listed = page.get_by_role("table", name="All sweeps").get_by_role("row", name="rule-by-seed")
    expect(listed).to_contain_text("completed")
