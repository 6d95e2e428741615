"""The runs list as a research table, in a real browser over a real manager and workers: search
by name, filter by status and by sweep, sort by a header, add a param and a final-metric
column, and find it all again after a reload and after the back button from a run."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.ui.support import deploy_workbench_study, finished, launch, sign_in, synthetic_run

pytestmark = pytest.mark.browser

FINAL = {"completed", "failed", "cancelled"}


def _played(manager) -> dict[str, int]:
    """Three finished runs with different rules, one cancelled, and a two-run sweep."""
    pid = deploy_workbench_study(manager)
    ids = {}
    with manager.api() as api:
        for name, ratio in (("beta low", 0.25), ("beta high", 0.75), ("alpha", 0.5)):
            body = {**synthetic_run(pid, name, seed=1, rounds=2), "rule": {"ratio": ratio}}
            ids[name] = launch(api, body)
            assert finished(api, ids[name])["status"] == "completed"
        ids["beta stopped"] = launch(
            api, synthetic_run(pid, "beta stopped", seed=2, rounds=50, latency_s=0.5)
        )
        resp = api.post(f"/api/simulations/{ids['beta stopped']}/cancel")
        assert resp.status_code == 200, resp.text
        assert finished(api, ids["beta stopped"])["status"] == "cancelled"
        resp = api.post(
            "/api/sweeps",
            json={
                "name": "ratio sweep",
                "populations": [pid],
                "base": {"rounds": 2, "policy": {"kind": "synthetic"}},
                "grid": {"rule.ratio": [0.3, 0.6]},
            },
        )
        assert resp.status_code == 202, resp.text
        ids["sweep"] = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/sweeps/{ids['sweep']}").json()["status"] in FINAL,
            120,
            what="the sweep to end",
        )
    return ids


def _names(table) -> list[str]:
    return [
        row.get_by_role("link").first.inner_text()
        for row in table.get_by_role("row").all()[1:]  # the header row first
    ]


def test_filter_sort_columns_survive_reload_and_back(page, manager, dashboard_built, screenshot):
    ids = _played(manager)
    sign_in(page, manager)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Simulations").click()
    table = page.get_by_role("table", name="All simulations")
    rows = table.get_by_role("row")
    expect(rows).to_have_count(1 + 6)
    # Newest first by default, and the Created header says so.
    expect(page.get_by_role("columnheader", name="Created")).to_have_attribute(
        "aria-sort", "descending"
    )

    # Search by name, then keep the completed ones.
    page.get_by_label("Search by name").fill("BETA")
    expect(page).to_have_url(re.compile(r"[?&]q=BETA\b"))
    expect(rows).to_have_count(1 + 3)
    page.get_by_label("Filter by status").select_option("completed")
    expect(page).to_have_url(re.compile(r"[?&]status=completed\b"))
    expect(rows).to_have_count(1 + 2)

    # Sort by name: ascending, then descending.
    name_header = page.get_by_role("columnheader", name="Name")
    name_header.get_by_role("button").click()
    expect(name_header).to_have_attribute("aria-sort", "ascending")
    expect(page.get_by_role("columnheader", name="Created")).not_to_have_attribute(
        "aria-sort", re.compile(".")
    )
    wait_for(lambda: _names(table) == ["beta high", "beta low"], 10, what="sorted by name")
    name_header.get_by_role("button").click()
    expect(name_header).to_have_attribute("aria-sort", "descending")
    wait_for(lambda: _names(table) == ["beta low", "beta high"], 10, what="name descending")
    expect(page).to_have_url(re.compile(r"[?&]sort=-name\b"))

    # Add the rule's ratio and the final mean as columns, and sort by the ratio.
    page.get_by_role("button", name="Columns").click()
    chooser = page.get_by_role("group", name="Choose columns")
    chooser.get_by_role("checkbox", name="rule.ratio").check()
    chooser.get_by_role("checkbox", name="Mean guess").check()
    screenshot("runs-table-columns-chooser")
    page.keyboard.press("Escape")
    expect(chooser).to_have_count(0)
    ratio_header = page.get_by_role("columnheader", name="rule.ratio")
    expect(ratio_header).to_be_visible()
    expect(page.get_by_role("columnheader", name="Mean guess (final)")).to_be_visible()
    ratio_header.get_by_role("button").click()
    expect(ratio_header).to_have_attribute("aria-sort", "ascending")
    wait_for(lambda: _names(table) == ["beta low", "beta high"], 10, what="sorted by ratio")
    low = page.get_by_role("row", name=f"Simulation {ids['beta low']}")
    expect(low.get_by_role("cell").nth(-2)).to_have_text("0.25")
    with manager.api() as api:
        last = api.get(f"/api/simulations/{ids['beta low']}/rounds").json()["items"][-1]
    mean = f"{last['metrics']['mean']:,.4f}".rstrip("0").rstrip(".")
    expect(low.get_by_role("cell").nth(-1)).to_have_text(mean)
    expect(page).to_have_url(re.compile(r"[?&]params=rule\.ratio\b"))
    expect(page).to_have_url(re.compile(r"[?&]metrics=mean\b"))
    screenshot("runs-table-filtered-sorted-columns")

    def same_table():
        expect(page.get_by_label("Search by name")).to_have_value("BETA")
        expect(page.get_by_label("Filter by status")).to_have_value("completed")
        expect(page.get_by_role("columnheader", name="rule.ratio")).to_have_attribute(
            "aria-sort", "ascending"
        )
        expect(page.get_by_role("columnheader", name="Mean guess (final)")).to_be_visible()
        expect(rows).to_have_count(1 + 2)
        wait_for(lambda: _names(table) == ["beta low", "beta high"], 10, what="same order")

    page.reload()
    same_table()

    # To a run and back: the table is as it was left.
    low.get_by_role("link", name="beta low").click()
    expect(page).to_have_url(re.compile(rf"/simulations/{ids['beta low']}$"))
    page.go_back()
    same_table()

    # A sweep's runs, by the sweep filter, named by the sweep and the values they tried.
    page.get_by_label("Search by name").fill("")
    page.get_by_label("Filter by status").select_option("")
    page.get_by_label("Filter by sweep").select_option(label=f"ratio sweep (#{ids['sweep']})")
    expect(page).to_have_url(re.compile(rf"[?&]sweep_id={ids['sweep']}\b"))
    expect(rows).to_have_count(1 + 2)
    expect(table.get_by_role("link", name="ratio sweep · rule.ratio 0.3")).to_be_visible()
    expect(table.get_by_role("link", name="ratio sweep · rule.ratio 0.6")).to_be_visible()
