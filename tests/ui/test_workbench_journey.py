"""The run-analysis side of the dashboard in a real browser, over a real manager and worker
processes: two synthetic runs compared (curves, config diff naming the seed), a run's CLI file
played again by the manager, re-run, cancel with a reason and clone into the launch form; and
an LLM run against the tests' OpenAI-compatible server with its meters and transcripts."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench.openai_server import GARBAGE_TEXT, OpenAIServer, rate_fault
from tests.support_populations import YAML
from tests.ui.support import (
    deploy_workbench_study,
    finished,
    launch,
    sign_in,
    synthetic_run,
)

pytestmark = pytest.mark.browser

MODEL = "test-model"
FINAL = {"completed", "failed", "cancelled"}


def test_two_synthetic_runs_compared_rerun_cancelled_and_cloned(
    page, manager, dashboard_built, screenshot
):
    pid = deploy_workbench_study(manager)
    with manager.api() as api:
        first = launch(api, synthetic_run(pid, "compare A", seed=5, rounds=3))
        assert finished(api, first)["status"] == "completed"
        second = launch(api, synthetic_run(pid, "compare B", seed=6, rounds=5))
        assert finished(api, second)["status"] == "completed"

    sign_in(page, manager)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Simulations").click()
    compare = page.get_by_role("button", name=re.compile(r"^Compare selected"))
    expect(compare).to_be_disabled()
    page.get_by_label(f"Select simulation {first} for comparison").check()
    page.get_by_label(f"Select simulation {second} for comparison").check()
    expect(compare).to_have_text("Compare selected (2)")
    compare.click()

    expect(page).to_have_url(re.compile(rf"/compare\?ids={first}(%2C|,){second}$"))
    expect(page.get_by_role("heading", name="Compare runs")).to_be_visible()
    chart = page.get_by_test_id("compare-chart")
    expect(chart).to_have_attribute(
        "aria-label",
        re.compile(rf"simulation {first} \(3 rounds\).*simulation {second} \(5 rounds\)"),
    )
    # Mean, target and winner of each run; the readout under the chart keys the runs, and at a
    # round lists only the values there: round 5 has none of the 3-round run.
    for metric in ("Mean guess", "Target", "Winning guess"):
        expect(page.get_by_role("checkbox", name=metric)).to_be_checked()
    readout = page.get_by_test_id("compare-readout")
    expect(readout.locator("li")).to_have_count(2)
    expect(readout).to_contain_text(f"#{first} compare A")
    page.get_by_role("group", name=re.compile("Compared runs over rounds")).focus()
    page.keyboard.press("End")
    expect(readout).to_contain_text("Round 5")
    expect(readout.locator("li")).to_have_count(1)
    expect(readout.locator("li")).to_contain_text(f"#{second}: Mean guess")
    diff = page.get_by_role("table", name="Config differences")
    seed_row = diff.get_by_role("row", name="seed", exact=True)
    expect(seed_row).to_contain_text("5")
    expect(seed_row).to_contain_text("6")
    expect(diff.get_by_role("row", name="rounds", exact=True)).to_be_visible()
    # Only differing paths until asked for all: the shared policy kind shows with the toggle.
    expect(diff.get_by_role("row", name="policy.kind", exact=True)).to_have_count(0)
    page.get_by_label("Show all paths").check()
    expect(diff.get_by_role("row", name="policy.kind", exact=True)).to_be_visible()
    segments = page.get_by_role("table", name="Means by education per run")
    expect(segments.get_by_role("row", name="doctorate")).to_be_visible()
    screenshot("workbench-compare")

    # Deep-linkable: a reload shows the same comparison.
    page.reload()
    expect(page.get_by_test_id("compare-readout").locator("li")).to_have_count(2)

    # Each run's name goes to its page; its CLI file is a config the manager plays again.
    page.get_by_role("table", name="Compared runs").get_by_role("link", name="compare A").click()
    expect(page).to_have_url(re.compile(rf"/simulations/{first}$"))
    expect(page.get_by_test_id("run-started")).not_to_have_text("not yet")
    expect(page.get_by_test_id("run-duration")).to_contain_text(" s")
    config = page.get_by_test_id("config-text")
    expect(config).to_contain_text("seed: 5")
    cli_text = config.inner_text()
    screenshot("workbench-config")
    with manager.api() as api:
        resp = api.post("/api/simulations", content=cli_text.encode(), headers=YAML)
        assert resp.status_code == 202, resp.text
        replayed = resp.json()
        assert replayed["seed"] == "5" and replayed["rounds"] == 3, replayed
        finished(api, replayed["id"])
        original = api.get(f"/api/simulations/{first}/rounds").json()["items"]
        again = api.get(f"/api/simulations/{replayed['id']}/rounds").json()["items"]
        assert [r["mean"] for r in again] == [r["mean"] for r in original], "same seed, same run"

    # The chosen round lives in the URL and survives a reload.
    page.get_by_label("Show round").select_option("2")
    expect(page).to_have_url(re.compile(r"[?&]round=2\b"))
    page.reload()
    expect(page.get_by_label("Show round")).to_have_value("2")
    expect(page.get_by_role("heading", name="Guesses in round 2")).to_be_visible()

    # Re-run: a new run of the same population, config and seed, saying which run it repeats.
    page.get_by_role("button", name="Re-run").click()
    expect(page).not_to_have_url(re.compile(rf"/simulations/{first}(\?|$)"))
    rerun = int(re.search(r"/simulations/(\d+)", page.url).group(1))
    expect(page.get_by_role("link", name=f"Simulation {first}").first).to_be_visible()
    with manager.api() as api:
        assert finished(api, rerun)["seed"] == "5"
        slow = launch(api, synthetic_run(pid, "to cancel", seed=9, rounds=50, latency_s=1.0))

    # Cancel asks for a reason and shows it with the run.
    page.goto(f"{manager.url}/simulations/{slow}")
    page.get_by_role("button", name="Cancel simulation").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Reason").fill("wrong latency for this study")
    dialog.get_by_role("button", name="Cancel simulation").click()
    expect(page.get_by_test_id("cancel-reason")).to_have_text("wrong latency for this study")
    screenshot("workbench-cancelled")

    # Clone: a link to the launch form, which opens for it.
    page.get_by_role("link", name="Clone into launch form").click()
    expect(page).to_have_url(re.compile(rf"/simulations/new\?clone={slow}$"))
    expect(page.locator("#launch-simulation")).to_be_visible()
    screenshot("workbench-clone")


def test_llm_run_meters_and_invalid_transcripts(page, manager, dashboard_built, screenshot):
    pid = deploy_workbench_study(manager)
    with (
        OpenAIServer(model=MODEL, fault=rate_fault(garbage_rate=0.25)) as server,
        manager.api() as api,
    ):
        sid = launch(
            api,
            {
                "population_id": pid,
                "name": "gemma stand-in",
                "rounds": 2,
                "prompt": {"system": "roleplay", "user": "basic"},
                "policy": {
                    "kind": "llm",
                    "endpoints": [
                        {"base_url": server.base_url, "model": MODEL, "max_concurrency": 16}
                    ],
                },
                "deadlines": {"agent_s": 10},
                "segment_by": ["education"],
                "store_responses": True,
                "seed": 3,
                # A quarter of the answers are garbage: rounds fall below this floor.
                "participation_floor": 0.9,
            },
        )
        done = finished(api, sid)
        assert done["status"] == "completed", done
        rounds = api.get(f"/api/simulations/{sid}/rounds").json()["items"]
        assert sum(r["n_invalid"] for r in rounds) > 0, "the fake server answered some garbage"
        below = done["rounds_below_floor"]
        assert below == sum(r["participation"] < 0.9 for r in rounds) and below > 0, rounds

        sign_in(page, manager)
        page.goto(f"{manager.url}/simulations/{sid}")
        expect(page.get_by_role("heading", name="gemma stand-in", exact=True)).to_be_visible()
        # Not shown as whole: the banner counts the rounds below the floor, and each round
        # shows its participation and parse failures.
        expect(page.get_by_role("status", name="Below the participation floor")).to_contain_text(
            f"{below} round"
        )
        shares = page.locator("td[data-participation]").evaluate_all(
            "cells => cells.map(c => Number(c.dataset.participation))"
        )
        assert sorted(shares) == sorted(r["participation"] for r in rounds), shares
        expect(page.locator("td[data-parse-failures]")).to_have_count(len(rounds))

        run = page.get_by_role("table", name="LLM meters, whole run")
        endpoint = run.get_by_role("row", name=f"{MODEL} at {server.base_url}")
        expect(endpoint).to_be_visible()
        assert int(endpoint.get_attribute("data-requests")) > 0
        assert int(endpoint.get_attribute("data-tokens")) > 0
        expect(page.get_by_role("table", name="LLM meters, round 2")).to_be_visible()
        screenshot("workbench-llm-meters")

        browser = page.get_by_test_id("transcript-browser")
        browser.get_by_label("Status").select_option("invalid")
        expect(page).to_have_url(re.compile(r"[?&]t_status=invalid\b"))
        table = browser.get_by_role("table", name="Transcripts")
        rows = table.locator("tbody tr[data-status]")
        expect(rows.first).to_be_visible()
        statuses = rows.evaluate_all("rows => rows.map(r => r.dataset.status)")
        assert statuses and set(statuses) == {"invalid"}, statuses
        reasons = table.locator("tbody tr[data-status] td.transcript-reason").all_inner_texts()
        assert all(reason.strip() for reason in reasons), reasons

        rows.first.get_by_role("button", name="Show prompt and answer").click()
        detail = browser.get_by_test_id("transcript-detail")
        expect(detail.get_by_test_id("transcript-response")).to_have_text(GARBAGE_TEXT)
        expect(detail.get_by_test_id("transcript-prompt")).to_contain_text("highest education")
        expect(detail.get_by_test_id("transcript-reason")).not_to_be_empty()
        screenshot("workbench-transcripts-invalid")

        # The agent's own page lists its rounds of this run with prompt and answer.
        rows.first.get_by_role("link").first.click()
        agent = page.get_by_test_id("agent-transcripts")
        expect(agent.get_by_label("Simulation")).to_have_value(str(sid))
        agent_rows = agent.locator("tbody tr[data-status]")
        expect(agent_rows).to_have_count(2)
        expect(agent.locator('tbody tr[data-status="invalid"]')).not_to_have_count(0)
        screenshot("workbench-agent-transcripts")

        # A slow round: its meters show live from round.progress while it plays, then go.
        server.behaviour.latency_s = 0.25
        slow = launch(
            api,
            {
                "population_id": pid,
                "name": "slow endpoint",
                "rounds": 1,
                "policy": {
                    "kind": "llm",
                    "endpoints": [
                        {"base_url": server.base_url, "model": MODEL, "max_concurrency": 4}
                    ],
                },
                "deadlines": {"agent_s": 30},
                "seed": 4,
            },
        )
        page.goto(f"{manager.url}/simulations/{slow}")
        in_flight = page.get_by_role("table", name="LLM meters, round 1 in flight")
        live_row = in_flight.get_by_role("row", name=f"{MODEL} at {server.base_url}")
        expect(live_row).to_have_attribute(
            "data-requests", re.compile(r"^[1-9][0-9]*$"), timeout=30_000
        )
        screenshot("workbench-llm-live-meters")
        assert finished(api, slow)["status"] == "completed"
        expect(in_flight).to_have_count(0)
        expect(page.get_by_role("table", name="LLM meters, round 1")).to_be_visible()


BIG_SEED = "5561286856019017598"  # beyond 2^53: a JavaScript number would show ...018000


def test_a_64_bit_seed_is_shown_exactly_and_a_rerun_exports_the_same_decisions(
    page, manager, dashboard_built, screenshot
):
    pid = deploy_workbench_study(manager)
    with manager.api() as api:
        first = launch(api, synthetic_run(pid, "big seed", seed=int(BIG_SEED), rounds=3))
        assert finished(api, first)["seed"] == BIG_SEED

    sign_in(page, manager)
    page.goto(f"{manager.url}/simulations/{first}")
    expect(page.get_by_test_id("config-text")).to_contain_text(f"seed: {BIG_SEED}")
    expect(page.locator("dd.mono", has_text=BIG_SEED).first).to_have_text(BIG_SEED)
    page.get_by_role("button", name="Re-run").click()
    expect(page).not_to_have_url(re.compile(rf"/simulations/{first}(\?|$)"))
    rerun = int(re.search(r"/simulations/(\d+)", page.url).group(1))
    with manager.api() as api:
        assert finished(api, rerun)["seed"] == BIG_SEED
    expect(page.locator("dd.mono", has_text=BIG_SEED).first).to_have_text(BIG_SEED)
    screenshot("workbench-big-seed-rerun")
    with manager.api() as api:
        exports = [
            api.get(f"/api/simulations/{sid}/decisions", params={"format": "csv"}).content
            for sid in (first, rerun)
        ]
    assert exports[0].count(b"\n") == 1 + 3 * 60
    assert exports[0] == exports[1], "the re-run repeats the run decision for decision"
