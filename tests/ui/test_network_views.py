"""Networks in the dashboard (issue 28, item 6), on a real manager and two worker processes: a
population deployed with an Erdős–Rényi graph shows its Graph panel (numbers and degree
distribution), an agent page draws its ego network and lists its neighbours with their SIR
states, and the SIR run's page shows the compartment chart, the heatmap of values over rounds
and the bytes the workers sent each other. A population without a graph says so."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.support_network_runs import network_config
from tests.support_populations import deploy_population
from tests.support_simulations import export, finish, rounds_of, start
from tests.ui.conftest import SCREENSHOTS
from tests.ui.support import no_serious_axe_violations, sign_in

pytestmark = pytest.mark.browser

SIZE = 500
SIR = {"transmission": 0.3, "initial_infected": 5}
STATES = ("S", "I", "R")


def _degree_label(b: int) -> str:
    """worker_server/graphs/stats.py's log2 bins: [0], [1], [2, 3], [4, 7], ..."""
    if b == 0:
        return "0"
    low, high = 2 ** (b - 1), 2**b - 1
    return str(low) if low == high else f"{low}–{high}"


def _shot(screenshot, name: str) -> None:
    screenshot(name)


def _close_up(locator, name: str) -> None:
    """One view alone, beside the full-page screenshots (test-results/screenshots)."""
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def test_graph_panel_ego_network_and_sir_run_views(page, manager, dashboard_built, screenshot):
    manager.start_workers(procs=2)
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        60,
        what="two workers online",
    )
    with manager.api() as api:
        population = deploy_population(
            api, network_config("er-network", SIZE, {"kind": "erdos_renyi", "mean_degree": 4})
        )
        plain = deploy_population(api, network_config("no-graph", 10, None))
        pid = population["id"]
        graph = population["graph"]
        sid = start(
            api,
            {
                "population_id": pid,
                "name": "epidemic",
                "rounds": 50,
                "seed": 5,
                "plugin": {"name": "sir", "params": SIR},
            },
        )["id"]
        done = finish(api, sid, timeout=180)
        assert done["status"] == "completed", done
        played = rounds_of(api, sid)
        # An agent beside one the epidemic reached (recovered in the last round): its page
        # draws states of more than one kind.
        last_round = played[-1]["round"]
        rows = export(api, sid, "jsonl", round=last_round).decode().splitlines()
        recovered = [r["agent_id"] for r in map(json.loads, rows) if r["value"] == "R"]
        assert recovered, "the epidemic reached someone"
        around = api.get(f"/api/agents/{recovered[0]}/neighbors").json()["items"]
        neighbours = {
            a["id"]: api.get(f"/api/agents/{a['id']}/neighbors", params={"limit": 1000}).json()
            for a in around
        }
        plain_agent = api.get("/api/agents", params={"population_id": plain["id"], "limit": 1})
        plain_agent_id = plain_agent.json()["items"][0]["id"]
    assert neighbours, f"agent {recovered[0]} has neighbours"
    agent_id = max(neighbours, key=lambda a: len(neighbours[a]["items"]))
    items = neighbours[agent_id]["items"]
    degree = len(items)
    assert 0 < degree < 50 and neighbours[agent_id]["next_after"] is None
    # After the run every neighbour has a state of the last round; one of them is recovered.
    assert all(n["value"] in (0, 1, 2) for n in items), items
    assert any(n["value"] == 2 for n in items), items
    per_state = {state: sum(int(n["value"]) == i for n in items) for i, state in enumerate(STATES)}

    sign_in(page, manager)

    # --- the population page: the Graph panel ---------------------------------------------
    page.goto(f"{manager.url}/populations/{pid}")
    panel = page.get_by_role("region", name="Graph", exact=True)
    expect(panel).to_be_visible(timeout=30_000)
    facts = panel.get_by_role("definition")
    expect(panel.get_by_text("Erdős–Rényi", exact=True)).to_be_visible()
    stats = panel.get_by_label("Graph statistics")
    expect(stats).to_contain_text(f"Edges{graph['edges']:,}")
    expect(stats).to_contain_text(f"Degree range{graph['min_degree']}–{graph['max_degree']}")
    expect(stats).to_contain_text(f"Components{graph['components']:,}")
    expect(stats).to_contain_text(f"Isolated agents{graph['isolated']:,}")
    assert facts.count() >= 8
    histogram = graph["degree_histogram"]
    table = panel.get_by_role("table")
    expect(table.locator("tbody tr")).to_have_count(len(histogram))
    for b, count in enumerate(histogram):
        row = table.get_by_role("row", name=f"Degree {_degree_label(b)}", exact=True)
        expect(row).to_have_attribute("data-count", str(count))
        expect(row.get_by_role("cell").nth(1)).to_have_text(f"{count:,}")
    # The text alternative names every bin.
    figure = panel.get_by_test_id("degree-distribution")
    summary = figure.locator("#degree-summary")
    expect(summary).to_contain_text(f"degree {_degree_label(len(histogram) - 1)}:")
    _shot(screenshot, "network-population-graph")
    no_serious_axe_violations(page, "population page")

    # --- the agent page: ego network and neighbour list -----------------------------------
    page.goto(f"{manager.url}/agents/{agent_id}")
    section = page.get_by_role("region", name=re.compile(r"^Neighbours"))
    expect(section).to_be_visible(timeout=30_000)
    expect(section.get_by_role("heading", level=2)).to_have_text(f"Neighbours ({degree})")
    ego = section.get_by_test_id("ego-network")
    expect(ego.locator("circle.ego-neighbour")).to_have_count(degree)
    expect(ego.locator("line")).to_have_count(degree)
    expect(ego.locator("circle.ego-centre")).to_have_count(1)
    expect(section.get_by_test_id("ego-more")).to_have_count(0)
    # Coloured by state, with the plugin's options in the legend.
    legend = section.get_by_test_id("ego-legend")
    for state in STATES:
        expect(legend).to_contain_text(f"{state} ({per_state[state]} drawn)")
    expect(section.get_by_role("link", name="epidemic")).to_be_visible()
    drawn_values = sorted(
        int(v)
        for v in ego.locator("circle.ego-neighbour").evaluate_all(
            "(cs) => cs.map((c) => c.dataset.value)"
        )
    )
    assert drawn_values == sorted(int(n["value"]) for n in items)
    rows = section.get_by_role("table", name="Neighbour list").locator("tbody tr")
    expect(rows).to_have_count(degree)
    expect(section.get_by_role("status", name="Neighbours listed")).to_have_text(
        f"{degree} {'neighbour' if degree == 1 else 'neighbours'} listed"
    )
    first = items[0]
    expect(rows.first.get_by_role("cell").last).to_have_text(STATES[int(first["value"])])
    expect(rows.first).to_contain_text("group: ")
    _shot(screenshot, "network-agent-neighbours")
    no_serious_axe_violations(page, "agent page")
    # A neighbour's id leads to its page, which lists the agent among its neighbours.
    section.get_by_role("link", name=f"Agent {first['id']}", exact=True).click()
    expect(page.get_by_role("heading", name=f"Agent {first['id']}", exact=True)).to_be_visible()
    back = page.get_by_role("table", name="Neighbour list")
    expect(back.get_by_role("link", name=f"Agent {agent_id}", exact=True)).to_be_visible(
        timeout=30_000
    )

    # A population without a graph: a short line, no drawing.
    page.goto(f"{manager.url}/agents/{plain_agent_id}")
    expect(page.get_by_text("Its population has no graph", exact=False)).to_be_visible(
        timeout=30_000
    )
    expect(page.get_by_test_id("ego-network")).to_have_count(0)

    # --- the run page: compartments, heatmap, bytes between workers -----------------------
    page.goto(f"{manager.url}/simulations/{sid}")
    compartments = page.get_by_role(
        "figure", name="Compartments: Susceptible, Infectious, Recovered", exact=True
    )
    expect(compartments).to_be_visible(timeout=30_000)
    last = played[-1]
    chart = compartments.get_by_test_id("compartment-chart")
    expect(chart).to_have_attribute(
        "aria-label",
        re.compile(
            rf"^Susceptible, Infectious and Recovered over {len(played)} rounds?; "
            rf"round {last['round']}: Susceptible {last['metrics']['susceptible']:,} agents, "
            rf"Infectious {last['metrics']['infectious']:,} agents, "
            rf"Recovered {last['metrics']['recovered']:,} agents; Infectious peaked at "
        ),
    )
    # One chart, three lines (uPlot's legend lists the round and the three series).
    expect(compartments.locator(".u-legend .u-series")).to_have_count(4)
    # Its own small charts stay, one per declared metric.
    metrics = page.get_by_role("region", name="Metrics", exact=True)
    expect(metrics.get_by_role("figure", name="Infectious", exact=True)).to_be_visible()

    heatmap = page.get_by_role("region", name="Values over rounds", exact=True)
    expect(heatmap).to_be_visible()
    canvas = heatmap.get_by_test_id("heatmap-canvas")
    # Open for a run on a graph: a row per SIR state, a column per round.
    expect(canvas).to_be_visible()
    expect(heatmap.locator("figure.heatmap")).to_have_attribute("data-rows", "3")
    expect(heatmap.locator("figure.heatmap")).to_have_attribute("data-rounds", str(len(played)))
    expect(canvas).to_have_attribute(
        "aria-label",
        re.compile(
            rf"^Share of agents per value over {len(played)} rounds, 3 value rows; "
            r"round 1: most agents at S "
        ),
    )
    # The first round holds susceptible and infectious agents: at least two cells are painted.
    assert int(canvas.get_attribute("data-cells") or "0") >= 2
    for state in STATES:
        expect(heatmap.locator(".heatmap-y")).to_contain_text(state)
    _shot(screenshot, "network-run-page")
    # Close-ups of the new views, to look at.
    _close_up(compartments, "network-run-compartments")
    _close_up(heatmap, "network-run-heatmap")
    no_serious_axe_violations(page, "run page")
    heatmap.get_by_role("button", name="Hide heatmap").click()
    expect(canvas).to_have_count(0)
    heatmap.get_by_role("button", name="Show heatmap").click()
    expect(heatmap.get_by_test_id("heatmap-canvas")).to_be_visible()

    # Values crossed between the two worker processes: the stat and a column of the table.
    sent = [r["network_bytes"] for r in played]
    assert sum(sent) > 0, sent
    expect(page.get_by_test_id("network-bytes")).to_be_visible()
    table = page.get_by_role("table", name="Rounds")
    expect(table.get_by_role("columnheader", name="Sent between workers")).to_be_visible()
    expect(
        table.get_by_role("row", name="Round 1", exact=True).locator("td[data-network-bytes]")
    ).to_have_attribute("data-network-bytes", str(sent[0]))
    # The run stored only what changed: round 1 every agent's decision, round 2 far fewer.
    stored = [r["decisions_stored"] for r in played]
    assert stored[1] < stored[0], stored
    expect(table.get_by_role("columnheader", name="Rows stored")).to_be_visible()
    expect(
        table.get_by_role("row", name="Round 2", exact=True).locator("td[data-decisions-stored]")
    ).to_have_attribute("data-decisions-stored", str(stored[1]))

    # The same views in dark mode.
    page.emulate_media(color_scheme="dark")
    page.goto(f"{manager.url}/agents/{agent_id}")
    expect(page.get_by_test_id("ego-network").locator("circle.ego-neighbour")).to_have_count(degree)
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    _shot(screenshot, "network-agent-neighbours-dark")
    no_serious_axe_violations(page, "agent page, dark")
    page.goto(f"{manager.url}/populations/{pid}")
    expect(page.get_by_role("region", name="Graph", exact=True)).to_be_visible()
    no_serious_axe_violations(page, "population page, dark")
    page.goto(f"{manager.url}/simulations/{sid}")
    expect(page.get_by_test_id("heatmap-canvas")).to_be_visible()
    no_serious_axe_violations(page, "run page, dark")

    # Opinion dynamics on the same graph: the heatmap has a row per histogram bin over [0, 1],
    # and no compartments are drawn.
    page.emulate_media(color_scheme="light")
    with manager.api() as api:
        opinions = start(
            api,
            {
                "population_id": pid,
                "name": "opinions",
                "rounds": 15,
                "seed": 3,
                "plugin": {"name": "bounded_confidence", "params": {"epsilon": 0.3}},
            },
        )["id"]
        assert finish(api, opinions, timeout=180)["status"] == "completed"
        opinion_rounds = rounds_of(api, opinions)
    page.goto(f"{manager.url}/simulations/{opinions}")
    heatmap = page.get_by_role("region", name="Values over rounds", exact=True)
    figure = heatmap.locator("figure.heatmap")
    expect(figure).to_have_attribute("data-rounds", str(len(opinion_rounds)), timeout=30_000)
    expect(figure).to_have_attribute("data-rows", str(len(opinion_rounds[0]["histogram"])))
    expect(heatmap.locator(".heatmap-y")).to_contain_text("0–0.01")
    expect(heatmap.locator(".heatmap-y")).to_contain_text("0.99–1")
    expect(page.get_by_test_id("compartments")).to_have_count(0)
    expect(page.get_by_role("region", name="Metrics", exact=True)).to_be_visible()
    _close_up(heatmap, "network-opinions-heatmap")
