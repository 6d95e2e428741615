"""Faults in the dashboard, made for real: a worker removed while the others have no room for
all of its agents leaves its population degraded (hosted of size everywhere it shows), a repair
that finds no room says so, a run over it with partial rounds counts the lost agents, a new
worker makes it whole, and a running simulation is paused and resumed from the page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.support_populations import YAML
from tests.ui.support import EDUCATION_STUDY, sign_in, table_row

pytestmark = pytest.mark.browser

# Every worker process hosts at most this many agents: two hold the population of 1,000, one
# holds 600 of it.
CAPACITY = 600
ROUNDS = 8
# Each round lasts about this long (the synthetic policy's stand-in for an LLM call).
LATENCY_S = 1.0


def _nav(page, name: str) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()


def _population(manager, pid: int) -> dict:
    with manager.api() as api:
        return api.get(f"/api/populations/{pid}").json()


def _simulation(manager, sid: int) -> dict:
    with manager.api() as api:
        return api.get(f"/api/simulations/{sid}").json()


def test_degraded_population_repair_and_a_paused_run_resumed(
    page, manager_factory, dashboard_built, screenshot
):
    manager = manager_factory(extra_env={"POPULACE_CAPACITY": str(CAPACITY)}).start()
    manager.start_workers(procs=2)
    workers = wait_for(
        lambda: (ws := manager.workers(state="online")) and len(ws) == 2 and ws,
        60,
        what="two workers online",
    )
    with manager.api() as api:
        resp = api.post("/api/populations", content=EDUCATION_STUDY, headers=YAML)
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
    wait_for(lambda: _population(manager, pid)["status"] == "deployed", 60, what="deployed")

    # The cluster shows each worker's node and slot: its identity across restarts.
    sign_in(page, manager)
    page.evaluate("window.__noReload = true")
    for worker in workers:
        assert worker["slot"] is not None, worker
        row = table_row(page, "Workers", worker["address"])
        expect(row).to_contain_text(f"{worker['node']} / {worker['slot']}")
    screenshot("faults-1-cluster-node-slot")

    # The population's page, whole: a Repair button, every agent hosted.
    _nav(page, "Populations")
    table_row(page, "All populations", "education-study").get_by_role("link").click()
    main = page.get_by_role("main")
    expect(page.get_by_role("heading", name="education-study")).to_be_visible()
    expect(main.get_by_text("deployed", exact=True)).to_be_visible()
    expect(page.get_by_test_id("population-hosted")).to_contain_text("1,000")
    repair = page.get_by_role("button", name="Repair")
    expect(repair).to_be_visible()

    # One worker is removed: the other has room for 100 of its 500 agents. The page follows.
    per_worker = _population(manager, pid)["agents_per_worker"]
    removed = int(min(per_worker))
    with manager.api() as api:
        assert api.delete(f"/api/workers/{removed}").status_code == 204
    expect(main.get_by_text("degraded", exact=True)).to_be_visible(timeout=30_000)
    hosting = page.get_by_role("status", name="Hosting")
    expect(hosting).to_contain_text("degraded: 600 of 1,000 agents hosted", timeout=30_000)
    expect(hosting).to_contain_text("400 agents have no live worker")
    expect(page.get_by_test_id("population-hosted")).to_contain_text(re.compile(r"600\s*of 1,000"))
    unplaced = page.get_by_role("table", name="Agents per worker").get_by_role(
        "row", name="No worker"
    )
    expect(unplaced).to_contain_text("no worker (not hosted)")
    expect(unplaced).to_contain_text("400")
    expect(repair).to_be_visible()
    assert page.evaluate("window.__noReload") is True, "the page reloaded instead of updating live"
    screenshot("faults-2-population-degraded")

    # Repair now: no worker has room, and the page says so.
    repair.click()
    result = page.get_by_role("status", name="Repair result")
    expect(result).to_contain_text("Still degraded: 600 of 1,000 agents hosted")
    expect(result).to_contain_text("No online worker has room for the other 400")
    screenshot("faults-3-repair-without-room")

    # The list says it too.
    _nav(page, "Populations")
    listed = table_row(page, "All populations", "education-study")
    expect(listed.get_by_text("degraded", exact=True)).to_be_visible()
    expect(listed).to_contain_text("600 of 1,000 agents hosted")
    screenshot("faults-4-populations-degraded")

    # The launch form names the hosted count and offers partial rounds; a run with them
    # completes over the 600 hosted agents and counts the 400 others lost in every round.
    _nav(page, "Simulations")
    page.get_by_role("link", name="New simulation").click()
    form = page.locator("#launch-simulation")
    picker = form.get_by_label("Population")
    expect(picker).to_contain_text(
        f"education-study — 600 of 1,000 agents hosted, degraded (#{pid})"
    )
    expect(picker).to_have_accessible_description(re.compile("allow partial below"))
    form.get_by_label("Name (optional)").fill("partial run")
    form.get_by_label("Rounds").fill("2")
    form.get_by_label("Policy").select_option("synthetic")
    form.get_by_role("checkbox", name="Allow partial").check()
    screenshot("faults-5-launch-degraded")
    form.get_by_role("button", name="Launch simulation").click()
    expect(page.get_by_role("heading", name="partial run")).to_be_visible()
    partial_id = int(page.url.rsplit("/", 1)[1])
    expect(main.get_by_text("completed", exact=True)).to_be_visible(timeout=60_000)
    expect(page.get_by_role("status", name="Lost agents")).to_contain_text(
        "800 agent answers counted lost"
    )
    rounds = page.get_by_role("table", name="Rounds", exact=True)
    expect(rounds.get_by_role("columnheader", name="Lost")).to_be_visible()
    for n in (1, 2):
        expect(rounds.get_by_role("row", name=f"Round {n}", exact=True)).to_contain_text("400")
    expect(page.get_by_text("allowed: agents no live worker hosts count as lost")).to_be_visible()
    screenshot("faults-6-partial-run-lost-agents")
    assert _simulation(manager, partial_id)["lost_agents"] == 800

    # A worker with room arrives: the population is whole again (the keeper may repair it
    # before the button does); the page follows live.
    page.locator(f'main a[href="/populations/{pid}"]').first.click()
    expect(main.get_by_text("degraded", exact=True)).to_be_visible()
    manager.start_workers(procs=1)
    wait_for(lambda: len(manager.workers(state="online")) == 2, 60, what="a new worker online")
    page.get_by_role("button", name="Repair").click()
    expect(page.get_by_role("status", name="Repair result")).to_contain_text(
        "Repaired: all 1,000 agents are hosted by live workers."
    )
    expect(main.get_by_text("deployed", exact=True)).to_be_visible()
    expect(page.get_by_role("status", name="Hosting")).to_have_count(0)
    expect(page.get_by_test_id("population-hosted")).to_contain_text("1,000")
    screenshot("faults-7-repaired")

    # A running synthetic simulation is paused from its page, shows why, and resumes.
    with manager.api() as api:
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": pid,
                "name": "pausable run",
                "rounds": ROUNDS,
                "policy": {"kind": "synthetic", "latency_s": LATENCY_S},
                "seed": 5,
            },
        )
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
    _nav(page, "Simulations")
    table_row(page, "All simulations", f"Simulation {sid}").get_by_role(
        "link", name="pausable run"
    ).click()
    expect(page.get_by_role("heading", name="pausable run")).to_be_visible()
    expect(main.get_by_text("running", exact=True)).to_be_visible(timeout=30_000)
    expect(page.get_by_role("button", name="Resume")).to_have_count(0)
    table = page.get_by_role("table", name="Rounds", exact=True).locator("tbody tr")
    expect(table).not_to_have_count(0, timeout=30_000)
    screenshot("faults-8-simulation-running")
    page.get_by_role("button", name="Pause").click()

    expect(main.get_by_text("paused", exact=True)).to_be_visible(timeout=30_000)
    reason = page.get_by_role("status", name="Pause reason")
    expect(reason).to_contain_text(re.compile(rf"Paused after round \d+ of {ROUNDS}"))
    expect(reason).to_contain_text("paused by an operator")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel simulation")).to_be_enabled()
    expect(page.get_by_role("progressbar", name="Round progress")).to_have_count(0)
    paused = _simulation(manager, sid)
    assert paused["status"] == "paused" and paused["current_round"] < ROUNDS, paused
    expect(table).to_have_count(paused["current_round"])
    # The list shows the pause and its reason too.
    _nav(page, "Simulations")
    listed = table_row(page, "All simulations", f"Simulation {sid}")
    expect(listed.get_by_text("paused", exact=True)).to_be_visible()
    expect(listed).to_contain_text("paused by an operator")
    listed.get_by_role("link", name="pausable run").click()
    expect(page.get_by_role("status", name="Pause reason")).to_be_visible()
    screenshot("faults-9-simulation-paused")

    page.get_by_role("button", name="Resume").click()
    expect(main.get_by_text("running", exact=True)).to_be_visible(timeout=30_000)
    expect(page.get_by_role("status", name="Pause reason")).to_have_count(0)
    expect(main.get_by_text("completed", exact=True)).to_be_visible(timeout=120_000)
    expect(table).to_have_count(ROUNDS)
    shown = [int(n) for n in table.locator("td:first-child").all_inner_texts()]
    assert shown == list(range(1, ROUNDS + 1)), f"every round once, in order: {shown}"
    expect(page.get_by_test_id("current-round")).to_contain_text(f"{ROUNDS} of {ROUNDS}")
    for gone in ("Pause", "Resume"):
        expect(page.get_by_role("button", name=gone)).to_have_count(0)
    # A finished run offers Delete instead of Cancel.
    expect(page.get_by_role("button", name="Cancel simulation")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete simulation")).to_be_enabled()
    expect(page.get_by_role("status", name="Lost agents")).to_have_count(0)
    expect(
        page.get_by_role("table", name="Rounds", exact=True).get_by_role(
            "columnheader", name="Lost"
        )
    ).to_have_count(0)
    done = _simulation(manager, sid)
    assert (done["status"], done["current_round"], done["lost_agents"]) == ("completed", ROUNDS, 0)
    assert page.evaluate("window.__noReload") is True, "the page reloaded instead of updating live"
    screenshot("faults-10-simulation-resumed-completed")
