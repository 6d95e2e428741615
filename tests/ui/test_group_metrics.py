"""A run's group metrics in the dashboard (issue 28, "API and dashboard"), on a real manager and
two worker processes: the voter model on a population of 5-agent cliques shows a Groups panel
with every clique, a clique's consensus round as the API has it, keyset pages, a clique's rounds
as charts and the export (the token in a header); the guessing game's views are left out. A
guessing run on the same population shows them, and no Groups panel."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support import running_cluster
from tests.support_network_runs import network_config
from tests.support_populations import deploy_population
from tests.support_simulations import finish, rounds_of, start
from tests.ui.support import no_serious_axe_violations, sign_in

pytestmark = pytest.mark.browser

SIZE = 150
CLIQUE = 5
GROUPS = SIZE // CLIQUE  # 30: two pages of 20
PAGE = 20


@pytest.fixture(scope="module")
def voter_run(tmp_path_factory):
    """One manager, two worker processes, one population of cliques, one voter run played to
    its end (every clique unanimous, or the round limit)."""
    tmp = tmp_path_factory.mktemp("groups")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db", procs=2) as manager:
        with manager.api() as api:
            population = deploy_population(
                api, network_config("cliques", SIZE, {"kind": "cliques", "size": CLIQUE})
            )
            sid = start(
                api,
                {
                    "population_id": population["id"],
                    "name": "voters",
                    "rounds": 200,
                    "seed": 4,
                    "plugin": {"name": "voter", "params": {"initial_share": 0.5}},
                },
            )["id"]
            done = finish(api, sid, timeout=300)
            assert done["status"] == "completed", done
        yield {"manager": manager, "population": population["id"], "simulation": sid}


def _groups(api, sid: int, **params) -> dict:
    resp = api.get(f"/api/simulations/{sid}/groups", params=params)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _shown(value) -> str:
    return "–" if value is None else f"{round(value):,}"


def test_the_groups_panel_pages_charts_and_exports_a_voter_runs_cliques(
    page, voter_run, dashboard_built, screenshot
):
    manager, sid = voter_run["manager"], voter_run["simulation"]
    with manager.api() as api:
        last = rounds_of(api, sid)[-1]["round"]
        first_page = _groups(api, sid, limit=PAGE)
        second_page = _groups(api, sid, limit=PAGE, after=first_page["next_after"])
        series = api.get(f"/api/simulations/{sid}/groups/{GROUPS - 3}").json()
    assert first_page["round"] == last and first_page["groups"] == GROUPS
    assert first_page["names"] == ["consensus_round", "share_ones"]
    assert len(series["items"]) == last

    sign_in(page, manager)
    page.goto(f"{manager.url}/simulations/{sid}")
    panel = page.get_by_role("region", name="Groups", exact=True)
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel).to_have_attribute("data-groups", str(GROUPS))
    expect(panel).to_have_attribute("data-round", str(last))
    expect(panel.get_by_test_id("group-count")).to_contain_text(
        f"{GROUPS} groups in round {last}; groups 0–{PAGE - 1} shown"
    )
    # The round selector defaults to the last round; its label names it.
    expect(panel.get_by_label("Round", exact=True)).to_have_value("")
    expect(panel.get_by_label("Round", exact=True).locator("option").first).to_have_text(
        f"latest (round {last})"
    )

    # A column per metric, titled as the plugin declares it; each clique's consensus round
    # as the API has it.
    table = panel.get_by_role("table", name="Groups")
    expect(table.get_by_role("columnheader", name="Consensus reached in round")).to_be_visible()
    expect(table.get_by_role("columnheader", name="Share of 1s")).to_be_visible()
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(PAGE)
    for item in first_page["items"][:5]:
        row = table.get_by_role("row", name=f"Group {item['group']}", exact=True)
        expect(row.locator('td[data-metric="consensus_round"]')).to_have_text(
            _shown(item["values"]["consensus_round"])
        )
    reached = sum(g["values"]["consensus_round"] is not None for g in first_page["items"])
    summary = panel.get_by_test_id("group-summary").locator('li[data-metric="consensus_round"]')
    expect(summary).to_have_attribute("data-count", str(reached))
    expect(summary).to_contain_text(f"{reached} of {PAGE} with a value")
    screenshot("groups-panel")
    no_serious_axe_violations(page, "run page with groups")

    # The next page: the last ten cliques, asked after the first page's last one.
    pager = panel.get_by_role("navigation", name="Group pages")
    pager.get_by_role("button", name="Next page").click()
    expect(rows).to_have_count(GROUPS - PAGE)
    expect(rows.first).to_have_attribute("data-group", str(PAGE))
    expect(pager.get_by_role("button", name="Next page")).to_be_disabled()
    chosen = second_page["items"][-3]
    assert chosen["group"] == GROUPS - 3
    row = table.get_by_role("row", name=f"Group {chosen['group']}", exact=True)
    expect(row.locator('td[data-metric="consensus_round"]')).to_have_text(
        _shown(chosen["values"]["consensus_round"])
    )

    # A clique's rounds: one chart per metric over every round.
    row.get_by_role("button", name=f"Group {chosen['group']} over the rounds").click()
    view = panel.get_by_test_id("group-series")
    expect(
        view.get_by_role("heading", name=f"Group {chosen['group']} over the rounds")
    ).to_be_visible()
    expect(view).to_have_attribute("data-rounds", str(last))
    consensus = view.get_by_role("figure", name="Consensus reached in round", exact=True)
    expect(consensus.locator("canvas")).to_have_count(1)
    expect(consensus.get_by_role("group")).to_have_attribute(
        "aria-label", re.compile(rf"^Consensus reached in round over {last} rounds?; ")
    )
    expect(view.get_by_role("figure", name="Share of 1s", exact=True)).to_be_visible()
    screenshot("groups-panel-series")
    no_serious_axe_violations(page, "run page with a group's rounds")
    pager.get_by_role("button", name="Previous page").click()
    expect(rows).to_have_count(PAGE)
    expect(rows.first).to_have_attribute("data-group", "0")

    # The export, fetched with the token in a header (never in the URL), saved as a file.
    export = re.compile(r"/groups/export\?format=csv")
    with page.expect_request(export) as asked, page.expect_download() as download:
        panel.get_by_role("button", name="Export groups CSV").click()
    request = asked.value
    assert request.headers.get("authorization") == f"Bearer {manager.api_token}"
    assert manager.api_token not in request.url
    lines = open(download.value.path()).read().splitlines()
    assert lines[0] == "round,group,consensus_round,share_ones"
    assert len(lines) == 1 + GROUPS * last
    expect(panel.get_by_role("status", name="Group export result")).to_contain_text(
        f"Downloaded simulation-{sid}-groups.csv"
    )

    # No guessing game here: no target, winner, equilibrium or rule, nor their chart and columns.
    for test_id in ("latest-target", "latest-winner", "equilibrium", "rounds-chart"):
        expect(page.get_by_test_id(test_id)).to_have_count(0)
    rounds_table = page.get_by_role("table", name="Rounds")
    expect(rounds_table.get_by_role("columnheader", name="Mean")).to_be_visible()
    expect(rounds_table.get_by_role("columnheader", name="Target")).to_have_count(0)
    expect(page.get_by_role("heading", name=f"Values in round {last}")).to_be_visible()


def test_a_guessing_run_shows_its_game_and_no_groups(page, voter_run, dashboard_built):
    manager = voter_run["manager"]
    with manager.api() as api:
        sid = start(
            api,
            {
                "population_id": voter_run["population"],
                "name": "guesses",
                "rounds": 2,
                "seed": 2,
                "policy": {"kind": "synthetic"},
            },
        )["id"]
        assert finish(api, sid)["status"] == "completed"
        assert _groups(api, sid)["names"] == []
    sign_in(page, manager)
    # The panel decides from the page's groups request: wait for its answer before looking.
    with page.expect_response(re.compile(rf"/api/simulations/{sid}/groups\?")):
        page.goto(f"{manager.url}/simulations/{sid}")
    expect(page.get_by_role("heading", name="Guesses in round 2")).to_be_visible(timeout=30_000)
    expect(page.get_by_test_id("rounds-chart")).to_be_visible()
    expect(page.get_by_test_id("latest-target")).to_be_visible()
    expect(
        page.get_by_role("table", name="Rounds").get_by_role("columnheader", name="Target")
    ).to_be_visible()
    expect(page.get_by_test_id("groups")).to_have_count(0)
