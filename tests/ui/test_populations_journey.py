"""The dashboard in a real browser: cluster, populations from YAML, the agent browser, a level-k
simulation watched live and exported, an agent's decisions, clean-up."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.support_populations import YAML
from tests.ui.support import EDUCATION_STUDY, sign_in, table_row

pytestmark = pytest.mark.browser

BAD_CONFIG = """name: broken-study
size: 1000
distributions:
  - name: education
    categories:
      - {name: high school, weight: 0.5}
      - {name: doctorate, weight: 0.3}
persona:
  template: "You are someone with {education}."
"""
# Line 5 is `categories:` of distributions[0], where the weights do not sum to 1.
BAD_LINE = 5


def _two_workers(manager):
    manager.start_workers(procs=1)
    manager.start_workers(procs=1)
    return wait_for(
        lambda: (
            (ws := [w for w in manager.workers() if w["state"] == "online"]) and len(ws) == 2 and ws
        ),
        timeout=60,
        what="two workers online",
    )


def test_populations_journey(page, manager, dashboard_built, screenshot):
    sign_in(page, manager)
    workers = _two_workers(manager)
    capacity = sum(w["capacity"] for w in workers)
    for worker in workers:
        expect(
            table_row(page, "Workers", worker["address"]).get_by_role(
                "cell", name="online", exact=True
            )
        ).to_be_visible()
    expect(page.get_by_test_id("workers-online")).to_contain_text("2 of 2")
    expect(page.get_by_test_id("capacity")).to_contain_text(f"{capacity:,}")
    expect(page.get_by_test_id("agents-hosted")).to_contain_text("0")
    screenshot("journey-1-cluster")

    # Populations: a bad config first, with the error shown at its line.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Populations").click()
    expect(page.get_by_role("heading", name="Populations", exact=True)).to_be_visible()
    page.evaluate("window.__noReload = true")
    page.get_by_role("button", name="New population").click()
    editor = page.get_by_label("Population config (YAML)")
    editor.fill(BAD_CONFIG)
    page.get_by_role("button", name="Create population").click()
    errors = page.get_by_role("alert")
    expect(errors).to_contain_text("weights sum to 0.8, not 1")
    expect(errors).to_contain_text(f"line {BAD_LINE}")
    expect(errors).to_contain_text("distributions[0].categories")
    expect(editor).to_have_attribute("aria-invalid", "true")
    # Inline at the field: the message is drawn after the end of that very line.
    inline = page.locator(".backdrop-line.has-error")
    expect(inline).to_have_count(1)
    expect(inline).to_contain_text("weights sum to 0.8")
    assert (
        page.locator(".backdrop-line")
        .nth(BAD_LINE - 1)
        .get_attribute("class")
        .endswith("has-error")
    )
    errors.get_by_role("button", name=f"line {BAD_LINE}").click()
    expect(editor).to_be_focused()
    assert (
        page.evaluate(
            "() => { const t = document.activeElement; return t.value.slice(t.selectionStart, t.selectionEnd); }"
        )
        == "    categories:"
    )
    screenshot("journey-2-config-error")

    # A good config deploys, live.
    editor.fill(EDUCATION_STUDY)
    page.get_by_role("button", name="Create population").click()
    expect(page.get_by_role("heading", name="education-study")).to_be_visible()
    expect(page.get_by_test_id("agents-stored")).to_contain_text("1,000", timeout=60_000)
    main = page.get_by_role("main")
    expect(main.get_by_text("deployed", exact=True)).to_be_visible()
    expect(table_row(page, "education", "high school")).to_contain_text("500")
    expect(table_row(page, "education", "doctorate")).to_contain_text("200")
    expect(table_row(page, "occupation", "game theory professor")).to_contain_text("200")
    placement = page.get_by_role("table", name="Agents per worker").get_by_role("row")
    expect(placement).to_have_count(2)
    assert page.evaluate("window.__noReload") is True, "the page reloaded instead of updating live"
    screenshot("journey-3-population")

    # The agent browser, filtered, one page at a time.
    page.get_by_label("Attribute").select_option("occupation")
    page.get_by_label("Value").select_option("game theory professor")
    page.get_by_role("button", name="Apply filters").click()
    agents = page.get_by_role("table", name="Agents", exact=True).locator("tbody tr")
    expect(agents).to_have_count(25)
    expect(page.get_by_role("status", name="Agents shown")).to_have_text("Agents 1–25")
    for i in range(25):
        expect(agents.nth(i)).to_contain_text("occupation: game theory professor")
    first_page_ids = agents.locator("td").first.all_inner_texts()
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_role("status", name="Agents shown")).to_have_text("Agents 26–50")
    expect(agents.first).not_to_have_text(first_page_ids[0])
    for i in range(25):
        expect(agents.nth(i)).to_contain_text("education: doctorate")
    page.get_by_role("button", name="Previous page").click()
    expect(page.get_by_role("status", name="Agents shown")).to_have_text("Agents 1–25")
    screenshot("journey-4-agents-filtered")

    # One agent in full; it has played no simulation yet.
    agent_link = page.get_by_role("table", name="Agents", exact=True).get_by_role("link").first
    agent_id = int(agent_link.inner_text())
    agent_link.click()
    expect(page.get_by_role("heading", name=f"Agent {agent_id}")).to_be_visible()
    expect(page.locator("blockquote.persona")).to_have_text(
        "You are a game theory professor whose highest education is doctorate."
    )
    expect(table_row(page, "Attributes", "education doctorate")).to_be_visible()
    decisions = page.get_by_test_id("agent-decisions")
    expect(decisions.get_by_role("heading", name="Decisions across simulations")).to_be_visible()
    expect(decisions).to_contain_text("has not played in any simulation yet")
    # The agent's population by name (every page names it: issue 15).
    population_link = page.get_by_role("link", name="education-study").first
    expect(population_link).to_be_visible()
    population_id = int(population_link.get_attribute("href").rsplit("/", 1)[1])
    screenshot("journey-5-agent")

    sid = _launch_and_watch_level_k(page, screenshot)
    _export_csv(page, sid)

    # The agent's page now shows its six decisions, reached through a deep link into the browser.
    page.locator(f'main a[href="/populations/{population_id}"]').first.click()
    expect(page.get_by_role("heading", name="education-study")).to_be_visible()
    page.get_by_label("Go to agent number").fill(str(agent_id - (population_id << 32) + 1))
    page.get_by_role("button", name="Go", exact=True).click()
    page.get_by_role("link", name=f"Agent {agent_id}", exact=True).click()
    expect(page.get_by_role("heading", name=f"Agent {agent_id}")).to_be_visible()
    played = page.get_by_role("table", name="Decisions").locator("tbody tr")
    expect(played).to_have_count(6)
    for n in range(1, 7):
        expect(
            page.get_by_role("row", name=f"Simulation {sid} round {n}", exact=True)
        ).to_be_visible()
    with manager.api() as api:
        mine = api.get(f"/api/agents/{agent_id}/decisions").json()["items"]
    assert [d["round"] for d in mine] == [1, 2, 3, 4, 5, 6]
    expect(played.first).to_contain_text(f"{mine[0]['value']:,.2f}".rstrip("0").rstrip("."))
    screenshot("journey-8-agent-decisions")
    assert page.evaluate("window.__noReload") is True, "the page reloaded instead of updating live"

    # Delete, confirmed, and nothing is left.
    page.locator(f'main a[href="/populations/{population_id}"]').first.click()
    expect(page.get_by_role("heading", name="education-study")).to_be_visible()
    page.get_by_role("button", name="Delete population").click()
    dialog = page.get_by_role("dialog", name="Delete education-study?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("1,000 agents are removed")
    screenshot("journey-9-delete-confirm")
    dialog.get_by_role("button", name="Delete").click()
    result = page.get_by_role("status", name="Cleanup result")
    expect(result).to_contain_text("Deleted: agents removed from 2 workers", timeout=60_000)
    expect(result).to_contain_text("Agents left in the store: 0")
    expect(page.get_by_test_id("agents-stored")).to_contain_text(re.compile(r"store\s*0$"))
    expect(page.get_by_text("No agents match.")).to_be_visible()
    expect(main.get_by_text("deleted", exact=True)).to_be_visible()
    screenshot("journey-10-deleted")

    # The workers report that they host nothing any more.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Cluster").click()
    expect(page.get_by_test_id("agents-hosted")).to_contain_text(
        re.compile(r"hosted\s*0$"), timeout=15_000
    )
    with manager.api() as api:
        assert api.get("/api/agents", params={"limit": 1}).json()["items"] == []


def _launch_and_watch_level_k(page, screenshot) -> int:
    """Launch a 6-round 1/2 + 5 level-k simulation from the form (after a refused one) and
    watch its rounds arrive; returns its id."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Simulations").click()
    expect(page.get_by_role("heading", name="Simulations", exact=True)).to_be_visible()
    page.get_by_role("link", name="New simulation").click()
    form = page.locator("#launch-simulation")
    expect(form.get_by_label("Population")).to_contain_text("education-study")
    form.get_by_label("Rule").select_option("1/2+5")
    expect(form.get_by_text("Equilibrium: 10")).to_be_visible()
    form.get_by_label("Policy").select_option("level_k")
    # The manager validates; its messages show at the fields they name.
    form.get_by_label("Rounds").fill("0")
    form.get_by_label("Noise (std)").fill("-1")
    form.get_by_role("button", name="Launch simulation").click()
    expect(form.get_by_role("alert")).to_contain_text("2 problems")
    rounds = form.get_by_label("Rounds")
    expect(rounds).to_have_attribute("aria-invalid", "true")
    expect(rounds).to_have_accessible_description("Rounds must be between 1 and 1,000")
    expect(form.get_by_label("Noise (std)")).to_have_accessible_description(
        "Noise (std) must be between 0 and 1,000,000"
    )
    expect(form.get_by_label("Default depth")).to_have_attribute("aria-invalid", "false")
    screenshot("journey-6-simulation-form-errors")

    # Level 0 repeats last round's winner, level 1 best-responds once (x <- x/2 + 5): from 50,
    # the mean halves its distance to 10 every round, so round 6 lands within 2 of 10.
    form.get_by_label("Name (optional)").fill("convergence to 10")
    rounds.fill("6")
    form.get_by_label("Default depth").fill("1")
    form.get_by_label("Noise (std)").fill("1")
    form.get_by_label("Seed (optional)").fill("11")
    form.get_by_role("checkbox", name="education").check()
    form.get_by_role("button", name="Launch simulation").click()

    expect(page.get_by_role("heading", name="convergence to 10")).to_be_visible()
    sid = int(page.url.rsplit("/", 1)[1])
    table = page.get_by_role("table", name="Rounds", exact=True)
    for n in range(1, 7):
        expect(table.get_by_role("row", name=f"Round {n}", exact=True)).to_be_visible(
            timeout=60_000
        )
    expect(table.locator("tbody tr")).to_have_count(6)
    expect(page.get_by_role("main").get_by_text("completed", exact=True)).to_be_visible()
    means = [
        float(m)
        for m in table.locator("td[data-mean]").evaluate_all(
            "cells => cells.map(c => c.dataset.mean)"
        )
    ]
    distances = [abs(m - 10) for m in means]
    assert distances == sorted(distances, reverse=True), f"the mean approaches 10: {means}"
    assert distances[0] > 10 and distances[-1] <= 2, means
    expect(page.get_by_test_id("equilibrium")).to_contain_text("10")
    expect(page.get_by_test_id("current-round")).to_contain_text("6 of 6")
    segments = page.get_by_role("table", name="Means by education").locator("tbody tr")
    expect(segments).to_have_count(3)
    # The charts are keyboard stops (role group) named by what they show.
    expect(
        page.get_by_role("group", name=re.compile(r"^Histogram of round 6: 1,000 valid"))
    ).to_be_visible()
    expect(
        page.get_by_role("group", name=re.compile(r"over 6 rounds.*equilibrium 10\."))
    ).to_be_visible()
    # Live updates went into the charts made once, not into new charts per event.
    for chart in ("rounds-chart", "histogram-chart"):
        expect(page.get_by_test_id(chart)).to_have_attribute("data-charts-created", "1")
    assert page.evaluate("window.__noReload") is True, "the page reloaded instead of updating live"
    screenshot("journey-7-simulation")
    return sid


def _export_csv(page, sid: int) -> None:
    """The CSV export: fetched with the token in a header (never in a URL), saved as a file."""
    requests = []
    page.on("request", lambda r: "/decisions" in r.url and requests.append(r))
    with page.expect_download() as download:
        page.get_by_role("button", name="Export CSV").click()
    saved = download.value
    assert saved.suggested_filename == f"simulation-{sid}-decisions.csv"
    lines = Path(saved.path()).read_text().splitlines()
    assert lines[0] == "round,agent_id,value,status,response"
    assert len(lines) == 1 + 6 * 1000
    per_round = {}
    for line in lines[1:]:
        number, _, _, status, _ = line.split(",")
        assert status == "valid"
        per_round[int(number)] = per_round.get(int(number), 0) + 1
    assert per_round == {n: 1000 for n in range(1, 7)}
    expect(page.get_by_role("status", name="Export result")).to_contain_text(
        f"Downloaded simulation-{sid}-decisions.csv"
    )
    (request,) = requests
    assert request.url.endswith(f"/api/simulations/{sid}/decisions?format=csv")
    assert request.headers["authorization"].startswith("Bearer ")
    assert "token" not in request.url


def test_cluster_actions_with_confirmation(page, manager, dashboard_built, screenshot):
    workers = _two_workers(manager)
    sign_in(page, manager)
    # A population made elsewhere (here: the REST API) appears in the open list and deploys, live.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Populations").click()
    expect(page.get_by_text("No populations yet.")).to_be_visible()
    with manager.api() as api:
        resp = api.post("/api/populations", content=EDUCATION_STUDY, headers=YAML)
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        listed = table_row(page, "All populations", "education-study")
        expect(listed.get_by_text("deployed", exact=True)).to_be_visible(timeout=60_000)
        expect(listed).to_contain_text("1,000")
        screenshot("populations-list")
        per_worker = api.get(f"/api/populations/{pid}").json()["agents_per_worker"]
    target, other = workers
    hosted = per_worker[str(target["id"])]
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Cluster").click()
    row = table_row(page, "Workers", target["address"])
    expect(row).to_contain_text(f"{hosted:,} /", timeout=15_000)

    # Cancelling does nothing.
    row.get_by_role("button", name="Remove agents").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(f"Remove the agents of worker {target['id']}?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert _agents_on(manager, target["id"]) == hosted

    row.get_by_role("button", name="Remove agents").click()
    screenshot("cluster-remove-agents-confirm")
    page.get_by_role("dialog").get_by_role("button", name="Remove agents").click()
    result = page.get_by_role("status", name="Result")
    expect(result).to_contain_text(f"Worker {target['id']}: {hosted:,} agents removed")
    expect(result).to_contain_text(f"population {pid}: {hosted:,} removed")
    assert _agents_on(manager, target["id"]) == 0
    expect(row).to_contain_text("0 /", timeout=15_000)

    row.get_by_role("button", name="Drain").click()
    page.get_by_role("dialog").get_by_role("button", name="Drain").click()
    expect(row.get_by_role("cell", name="draining", exact=True)).to_be_visible()
    expect(page.get_by_role("status", name="Result")).to_contain_text(
        f"Worker {target['id']} is draining"
    )
    # ...and back: the drain is undone.
    row.get_by_role("button", name="Undrain").click()
    page.get_by_role("dialog").get_by_role("button", name="Undrain").click()
    expect(row.get_by_role("cell", name="online", exact=True)).to_be_visible()
    expect(page.get_by_role("status", name="Result")).to_contain_text("online again")

    other_row = table_row(page, "Workers", other["address"])
    other_row.get_by_role("button", name="Remove", exact=True).click()
    page.get_by_role("dialog").get_by_role("button", name="Remove worker").click()
    expect(other_row.get_by_role("cell", name="removed", exact=True)).to_be_visible()
    expect(page.get_by_test_id("workers-online")).to_contain_text(re.compile(r"online\s*1 of 1"))
    screenshot("cluster-after-actions")


def _agents_on(manager, worker_id: int) -> int:
    with manager.api() as api:
        return len(
            api.get("/api/agents", params={"worker_id": worker_id, "limit": 1000}).json()["items"]
        )


def _poll(page, predicate, what: str, timeout_ms: int = 15_000):
    """Wait while letting Playwright dispatch its handlers (a sleep would not)."""
    for _ in range(timeout_ms // 100):
        if predicate():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_dropped_websocket_resumes_without_refetching(page, manager, dashboard_built):
    """Drop the socket under the page; while it is away a worker starts draining. The page
    reconnects with since=, gets that change by replay and does not reload the worker list."""
    workers = _two_workers(manager)
    opened, urls, frames = [], [], []
    gate = {"open": True}

    def route(ws):
        urls.append(ws.url)
        if not gate["open"]:
            ws.close(code=1013, reason="test: the manager is unreachable")
            return
        server = ws.connect_to_server()

        def to_page(message):
            frames.append((len(opened), json.loads(message)))
            ws.send(message)

        server.on_message(to_page)
        opened.append(ws)

    # The cluster page's own socket (the run notices keep another, on simulation topics).
    page.route_web_socket(re.compile(r"/ws/events\?topics=cluster(&|$)"), route)
    list_requests = []
    page.on(
        "request",
        lambda r: "/api/workers" in r.url and r.method == "GET" and list_requests.append(r.url),
    )
    sign_in(page, manager)
    expect(page.get_by_role("status", name="Live updates")).to_have_text("live")
    victim = workers[0]
    row = table_row(page, "Workers", victim["address"])
    expect(row.get_by_role("cell", name="online", exact=True)).to_be_visible()
    # Two lists: one painted at once, the one fetched when the socket opened.
    _poll(page, lambda: len(list_requests) == 2 and len(frames) >= 3, "the lists and a few events")
    assert "since=" not in urls[0]

    gate["open"] = False
    opened[0].close(code=4000, reason="test drops the socket")
    expect(page.get_by_role("status", name="Live updates")).to_have_text("reconnecting…")
    last_seen = max(f["seq"] for n, f in frames if n == 1)
    with manager.api() as api:
        assert api.post(f"/api/workers/{victim['id']}/drain").status_code == 200
    page.wait_for_timeout(1500)  # heartbeats go on too while the page is away
    gate["open"] = True

    _poll(page, lambda: len(opened) >= 2, "the page reconnected")
    assert f"since={last_seen}&" in opened[1].url and "epoch=" in opened[1].url
    expect(row.get_by_role("cell", name="draining", exact=True)).to_be_visible()
    expect(page.get_by_role("status", name="Live updates")).to_have_text("live")
    hello = next(f for n, f in frames if n == 2 and f["type"] == "hello")
    assert hello["payload"]["replayed"] >= 2, hello
    resumed = [f["seq"] for n, f in frames if n == 2 and f["type"] != "hello"]
    assert resumed[: hello["payload"]["replayed"]] == list(
        range(last_seen + 1, last_seen + 1 + hello["payload"]["replayed"])
    ), "the replay starts right after the last event the page saw, with no gap"
    assert not any(f["type"] == "resync" for _, f in frames)
    assert len(list_requests) == 2, f"the page refetched instead of resuming: {list_requests}"
