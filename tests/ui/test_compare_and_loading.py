"""A sweep of eight runs read as a study, and panels that say what went wrong.

Compare shows every run of the sweep (it cut them to six, silently), with a readout that lists
only the values a round has; the sweep page plots the outcome against each swept param, one
point per run; and a panel whose request fails shows why with a Retry that works once the
API answers again (the test fails the network once with page.route, never the product), while
the connection badge says offline instead of live."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.support_populations import YAML
from tests.ui.support import deploy_workbench_study, sign_in

pytestmark = pytest.mark.browser

SEEDS = [1, 2, 3, 4]
SWEEP = """name: eight-runs
mode: sequence
populations: [{pid}]
base:
  rounds: 2
  policy: {{kind: synthetic, latency_s: 0}}
grid:
  rule: [{{preset: "2/3"}}, {{preset: "1/2+5"}}]
  seed: [{seeds}]
"""


def _fail_once(page, pattern: str) -> dict:
    """The first request matching `pattern` fails as a dropped network would; the rest go through."""
    seen = {"failed": 0}

    def handle(route):
        if seen["failed"] == 0:
            seen["failed"] += 1
            route.abort("connectionrefused")
        else:
            route.continue_()

    page.route(re.compile(pattern), handle)
    return seen


def _shown(value: float) -> str:
    """A number as the dashboard writes it: en-US, at most two decimals."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def test_a_sweep_is_compared_whole_and_plotted_and_a_failed_panel_retries(
    page, manager, dashboard_built, screenshot
):
    pid = deploy_workbench_study(manager)
    with manager.api() as api:
        resp = api.post(
            "/api/sweeps",
            content=SWEEP.format(pid=pid, seeds=", ".join(map(str, SEEDS))),
            headers=YAML,
        )
        assert resp.status_code == 202, resp.text
        sweep = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/sweeps/{sweep}").json()["status"] == "completed",
            180,
            what="the sweep completed",
        )
        runs = api.get(f"/api/simulations?sweep_id={sweep}&limit=100").json()["items"]
    assert len(runs) == 8 and all(r["status"] == "completed" for r in runs)
    by_id = {r["id"]: r for r in runs}

    sign_in(page, manager)

    # A failed load says why and offers a Retry; the badge says offline, not live.
    seen = _fail_once(page, rf"/api/sweeps/{sweep}\?")
    page.goto(f"{manager.url}/sweeps/{sweep}")
    alert = page.get_by_role("alert").filter(has_text=f"Could not load sweep {sweep}")
    expect(alert).to_contain_text("Cannot reach the manager")
    expect(page.get_by_role("status", name="Live updates")).to_have_text("offline")
    assert seen["failed"] == 1
    alert.get_by_role("button", name="Retry").click()
    expect(alert).to_have_count(0)
    expect(page.get_by_role("status", name="Live updates")).to_have_text("live")
    results = page.get_by_role("table", name="Results")
    expect(results.get_by_role("row")).to_have_count(1 + 8)

    # The outcome (each run's final mean guess) against each swept param: a point per run.
    for param in ("rule", "seed"):
        plot = page.get_by_test_id(f"sweep-plot-{param}")
        expect(plot).to_have_attribute("data-points", "8")
        expect(plot.locator("circle")).to_have_count(8)
    expect(page.get_by_label("Outcome (each run's final value)")).to_have_value("mean")
    # Read from the keyboard: the first point of the seed plot is one of the seed-1 runs.
    page.get_by_role("group", name=re.compile("Mean guess by seed: use the arrow keys")).focus()
    page.keyboard.press("Home")
    readout = page.get_by_test_id("sweep-plot-seed-readout")
    expect(readout).to_contain_text("seed = 1, mean guess")
    run_id = int(re.search(r"Run (\d+)", readout.inner_text()).group(1))
    assert by_id[run_id]["params"]["rule"] is not None
    expect(readout).to_contain_text(_shown(by_id[run_id]["last_metrics"]["mean"]))
    screenshot("sweep-outcome-by-param")
    # The outcome chosen is in the URL: a reload plots the same.
    page.get_by_label("Outcome (each run's final value)").select_option("winner_value")
    expect(page).to_have_url(re.compile(r"[?&]outcome=winner_value"))
    page.reload()
    expect(page.get_by_label("Outcome (each run's final value)")).to_have_value("winner_value")
    expect(page.get_by_test_id("sweep-plot-rule").locator("circle")).to_have_count(8)
    expect(page.get_by_role("group", name=re.compile("Winning guess by rule"))).to_be_visible()

    # Compare runs takes all eight, none left out.
    page.get_by_role("link", name="Compare runs").click()
    compared = page.get_by_role("table", name="Compared runs")
    expect(compared.get_by_role("row")).to_have_count(1 + 8)
    expect(page.get_by_role("status", name="Left out of the comparison")).to_have_count(0)
    # The readout lists, at a round, each run's values there, and nothing empty.
    page.get_by_role("group", name=re.compile("Compared runs over rounds")).focus()
    page.keyboard.press("Home")
    compare_readout = page.get_by_test_id("compare-readout")
    expect(compare_readout).to_contain_text("Round 1")
    expect(compare_readout.locator("li[data-run]")).to_have_count(8)
    expect(compare_readout).not_to_contain_text("--")
    # Eight runs draw their mean alone; another metric is a checkbox away, kept in the URL.
    target = page.get_by_role("checkbox", name="Target", exact=True)
    expect(target).not_to_be_checked()
    target.check()
    expect(page).to_have_url(re.compile(r"[?&]metrics=mean(%2C|,)target"))
    page.reload()
    expect(page.get_by_role("checkbox", name="Target", exact=True)).to_be_checked()
    expect(page.get_by_role("checkbox", name="Mean guess", exact=True)).to_be_checked()
    screenshot("compare-eight-runs")

    # A run that does not exist is named, not dropped silently.
    ids = ",".join(str(i) for i in by_id)
    page.goto(f"{manager.url}/compare?ids={ids},99999")
    notice = page.get_by_role("status", name="Left out of the comparison")
    expect(notice).to_contain_text("Comparing 8 of the 9 runs asked for: #99999 does not exist")
    expect(compared.get_by_role("row")).to_have_count(1 + 8)

    # A run that could not be loaded is named with the reason, and Retry brings it in.
    failing = next(iter(by_id))
    _fail_once(page, rf"/api/simulations/{failing}/rounds")
    page.goto(f"{manager.url}/compare?ids={ids}")
    expect(notice).to_contain_text(f"#{failing} could not be loaded (Cannot reach the manager")
    expect(compared.get_by_role("row")).to_have_count(1 + 7)
    notice.get_by_role("button", name="Retry").click()
    expect(notice).to_have_count(0)
    expect(compared.get_by_role("row")).to_have_count(1 + 8)

    # The run page on a slow network: skeletons until its rounds arrive, never "no round has
    # completed yet" nor a disabled Cancel for a run that completed.
    sid = runs[0]["id"]
    rounds_url = re.compile(rf"/api/simulations/{sid}/rounds")
    held = []
    page.route(rounds_url, lambda route: held.append(route))
    page.goto(f"{manager.url}/simulations/{sid}")
    expect(page.get_by_role("status", name="Loading the rounds…")).to_be_visible()
    expect(page.get_by_text("No round has completed yet.")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel simulation")).to_have_count(0)
    page.unroute(rounds_url)
    assert held, "the page asked for the run's rounds"
    for route in held:
        route.continue_()
    expect(page.get_by_role("heading", name=re.compile("Guesses in round 2"))).to_be_visible()
    expect(page.get_by_role("status", name="Loading the rounds…")).to_have_count(0)

    # When its rounds fail, the reason and a Retry that works once the API answers again.
    _fail_once(page, rf"/api/simulations/{sid}/rounds")
    page.reload()
    alert = page.get_by_role("alert").filter(has_text=f"Could not load simulation {sid}")
    expect(alert).to_be_visible()
    expect(page.get_by_text("No round has completed yet.")).to_have_count(0)
    alert.get_by_role("button", name="Retry").click()
    expect(alert).to_have_count(0)
    expect(page.get_by_test_id("current-round")).to_contain_text("2")
    expect(page.get_by_role("heading", name=re.compile("Guesses in round 2"))).to_be_visible()
