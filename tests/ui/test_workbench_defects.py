"""The numbers on screen, in a real Chromium against a real manager and real workers: a dead
socket leaves "live", a silent worker reads "late", new tabs stay signed in, names instead of
ids, paging and filters in the URL, the launch form, and every main page usable at 390 px in
dark mode."""

from __future__ import annotations

import os
import re
import signal

import pytest
from playwright.sync_api import expect

from bench.openai_server import OpenAIServer
from tests.support import Manager, stop_process, wait_for
from tests.support_populations import deploy_population, population_yaml

pytestmark = pytest.mark.usefixtures("dashboard_built")

MODEL = "test-model"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A manager that marks nobody offline for ten minutes (its start-up grace), so a frozen
    worker stays "online" in the store while its heartbeats age past the TTL."""
    tmp = tmp_path_factory.mktemp("workbench-defects")
    manager = Manager(
        tmp=tmp,
        database_url=f"sqlite+aiosqlite:///{tmp}/populace.db",
        extra_env={"POPULACE_STARTUP_GRACE_S": "600"},
    ).start()
    node = manager.start_workers(procs=1)
    try:
        wait_for(lambda: len(manager.workers(state="online")) == 1, 60, what="a worker online")
        with manager.api() as api:
            config = population_yaml("three-educations", name="education-study", size=300)
            pid = deploy_population(api, config)["id"]
            resp = api.post(
                "/api/simulations",
                json={
                    "population_id": pid,
                    "name": "baseline run",
                    "rounds": 3,
                    "policy": {"kind": "level_k", "default_depth": 1, "noise_std": 1.0},
                    "seed": "9007199254740993",
                    "deadlines": {"round_s": 120},
                },
            )
            assert resp.status_code == 202, resp.text
            sid = resp.json()["id"]
            wait_for(
                lambda: api.get(f"/api/simulations/{sid}").json()["status"] == "completed",
                60,
                what="the baseline run completed",
            )
        manager.population_id, manager.simulation_id = pid, sid  # type: ignore[attr-defined]
        yield manager
    finally:
        stop_process(node)
        manager.stop()


def _sign_in(page, manager):
    page.goto(manager.url)
    page.get_by_label("API token").fill(manager.api_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Cluster")).to_be_visible()


def test_the_live_badge_leaves_live_when_the_browser_goes_offline(cluster, page, screenshot):
    _sign_in(page, cluster)
    badge = page.get_by_role("status", name="Live updates")
    expect(badge).to_have_text("live")
    page.context.set_offline(True)
    try:
        # The browser says it is offline: the badge says so (not "live", not "reconnecting").
        expect(badge).to_have_text("offline", timeout=40_000)
        screenshot("defects-badge-offline")
    finally:
        page.context.set_offline(False)
    expect(badge).to_have_text("live", timeout=60_000)


def test_a_silent_worker_reads_late_until_the_manager_marks_it(manager_factory, page, screenshot):
    """The manager restarts while a worker is frozen: the store says online (the start-up grace
    gives every worker time to come back) but its last heartbeat is older than the TTL."""
    manager = manager_factory(extra_env={"POPULACE_STARTUP_GRACE_S": "600"}).start()
    manager.start_workers(procs=1)
    (worker,) = wait_for(lambda: manager.workers(state="online"), 60, what="a worker online")
    assert worker["ttl_s"] > 0 and worker["heartbeat_interval_s"] > 0, worker
    os.kill(worker["pid"], signal.SIGSTOP)  # alive, but no more heartbeats
    try:
        manager.stop()
        manager.start()
        _sign_in(page, manager)
        row = page.locator(f'tr[data-worker-id="{worker["id"]}"]')
        expect(row.locator(".badge")).to_have_text("late", timeout=30_000)
        # The manager still says online: the dashboard knows better than "online, 9 s ago".
        assert [w["state"] for w in manager.workers()] == ["online"]
        expect(row.locator("[data-late]")).to_have_attribute("title", re.compile(r"TTL \(\d"))
        screenshot("defects-worker-late")
    finally:
        os.kill(worker["pid"], signal.SIGCONT)
    expect(row.locator(".badge")).to_have_text("online", timeout=60_000)


def test_a_new_tab_is_signed_in_and_signing_out_signs_out_every_tab(cluster, page):
    _sign_in(page, cluster)
    second = page.context.new_page()
    second.goto(f"{cluster.url}/populations")
    expect(second.get_by_role("heading", name="Populations", exact=True)).to_be_visible()
    assert "token" not in second.url
    second.get_by_role("button", name="Sign out").click()
    expect(second.get_by_label("API token")).to_be_visible()
    expect(page.get_by_label("API token")).to_be_visible()  # the first tab heard it
    second.close()


def test_names_and_url_state(cluster, page):
    pid, sid = cluster.population_id, cluster.simulation_id
    _sign_in(page, cluster)
    page.goto(f"{cluster.url}/simulations")
    row = page.get_by_role("row", name=f"Simulation {sid}")
    expect(row.get_by_role("link", name="education-study")).to_be_visible()
    expect(row).not_to_contain_text(f"Population {pid}")

    page.get_by_label("Filter by status").select_option("completed")
    expect(page).to_have_url(re.compile(r"[?&]status=completed\b"))
    page.reload()
    expect(page.get_by_label("Filter by status")).to_have_value("completed")
    expect(page.get_by_role("row", name=f"Simulation {sid}")).to_be_visible()
    page.get_by_label("Filter by status").select_option("failed")
    expect(page.get_by_role("row", name=f"Simulation {sid}")).to_have_count(0)

    page.goto(f"{cluster.url}/populations")
    page.get_by_label("Show deleted").check()
    expect(page).to_have_url(re.compile(r"[?&]deleted=1\b"))
    page.reload()
    expect(page.get_by_label("Show deleted")).to_be_checked()

    page.goto(f"{cluster.url}/populations/{pid}")
    page.get_by_label("Attribute").select_option("education")
    page.get_by_label("Value").select_option("high school")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"[?&]attr=education%3Ahigh\+school\b"))
    page.get_by_role("button", name="Next page").click()
    expect(page).to_have_url(re.compile(r"[?&]page=2\b"))
    shown = page.get_by_role("status", name="Agents shown")
    expect(shown).to_have_text("Agents 26–50")
    page.reload()
    expect(shown).to_have_text("Agents 26–50")
    expect(page.get_by_label("Value")).to_have_value("high school")


def test_the_launch_form(cluster, page, screenshot):
    pid, sid = cluster.population_id, cluster.simulation_id
    _sign_in(page, cluster)
    page.goto(f"{cluster.url}/simulations?launch&population={pid}")
    form = page.locator("#launch-simulation")
    picker = form.get_by_label("Population")
    expect(picker).to_contain_text(f"education-study — 300 agents (#{pid})")

    # Level-k has no prompt; the LLM form has it, several endpoints and its own fields.
    form.get_by_label("Policy").select_option("level_k")
    expect(form.get_by_label("System prompt")).to_have_count(0)
    expect(form.get_by_label("Answer mode")).to_have_count(0)
    estimate = form.get_by_test_id("launch-estimate")
    expect(estimate).to_contain_text("300 agents")
    form.get_by_label("Rounds").fill("0")  # invalid: the estimate hides
    expect(estimate).to_have_count(0)
    form.get_by_label("Rounds").fill("4")
    expect(estimate).to_contain_text("4 rounds × 300 agents")

    form.get_by_label("Policy").select_option("llm")
    expect(form.get_by_label("System prompt")).to_be_visible()
    for label in ("Deadline per answer (s, optional)", "Store responses"):
        expect(form.get_by_label(label)).to_be_visible()
    with OpenAIServer(model=MODEL) as server:
        form.get_by_label("Endpoint 1 URL").fill(server.base_url)
        form.get_by_label("Endpoint 1 model").fill(MODEL)
        form.get_by_role("button", name="Add endpoint").click()
        form.get_by_label("Endpoint 2 URL").fill("http://127.0.0.1:9")
        form.get_by_label("Endpoint 2 USD per million prompt tokens").fill("0.5")
        form.get_by_role("button", name="Test connection").click()
        expect(form.get_by_role("status", name="Endpoint 1 connection")).to_have_text(
            f"Reachable: serves {MODEL}", timeout=30_000
        )
        expect(form.get_by_role("status", name="Endpoint 2 connection")).to_contain_text("Failed")
        # The estimate says in plain words how agents share calls (the form's default is basic
        # answers over completions at T = 0.7: a few ask, then the distribution is read).
        expect(estimate).to_contain_text("LLM requests")
        expect(estimate).to_contain_text(
            "agents with the same prompt share one answer distribution"
        )
        expect(estimate).not_to_contain_text("exchangeable")
        screenshot("defects-launch-llm")
        form.get_by_role("button", name="Remove endpoint 2").click()
        expect(form.get_by_label("Endpoint 2 URL")).to_have_count(0)

    # Clone: every field from the stored config, the 64-bit seed exactly.
    page.goto(f"{cluster.url}/simulations?clone={sid}")
    form = page.locator("#launch-simulation")
    expect(page.get_by_role("status", name="Clone")).to_contain_text(f"simulation {sid}")
    expect(form.get_by_label("Seed (optional)")).to_have_value("9007199254740993")
    expect(form.get_by_label("Rounds")).to_have_value("3")
    expect(form.get_by_label("Name (optional)")).to_have_value("baseline run")
    expect(form.get_by_label("Noise (std)")).to_have_value("1")
    expect(form.get_by_label("Deadline per round (s, optional)")).to_have_value("120")


MAIN_PAGES = (
    "/cluster",
    "/populations",
    "/populations/{pid}",
    "/simulations",
    "/simulations/{sid}",
)


def test_main_pages_fit_390_px_in_dark_mode(cluster, browser):
    pid, sid = cluster.population_id, cluster.simulation_id
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        _sign_in(page, cluster)
        for path in MAIN_PAGES:
            url = cluster.url + path.format(pid=pid, sid=sid)
            page.emulate_media(color_scheme="light")
            page.goto(url)
            expect(page.locator("main h1")).to_be_visible()
            page.wait_for_load_state("networkidle")
            light = page.evaluate("getComputedStyle(document.body).color")
            page.emulate_media(color_scheme="dark")
            # The dashboard follows the system theme (theme.ts) once the change event is in.
            expect(page.locator("html")).to_have_attribute("data-theme", "dark")
            dark = page.evaluate("getComputedStyle(document.body).color")
            assert dark != light, (path, dark, light)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{path} overflows: {width} px"
            name = path.strip("/").replace("/", "-").replace("{", "").replace("}", "")
            page.screenshot(path=_screenshot_path(f"defects-390-dark-{name}"), full_page=True)
    finally:
        context.close()


def _screenshot_path(name: str) -> str:
    from tests.ui.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return str(SCREENSHOTS / f"{name}.png")


def test_charts_zoom_and_switch_to_a_log_scale(cluster, page):
    _sign_in(page, cluster)
    page.goto(f"{cluster.url}/simulations/{cluster.simulation_id}")
    chart = page.get_by_test_id("rounds-chart")
    tools = page.get_by_role("toolbar", name="rounds-chart zoom")
    expect(chart).to_have_attribute("data-zoomed", "false")
    tools.get_by_role("button", name="Zoom in").click()
    expect(chart).to_have_attribute("data-zoomed", "true")
    tools.get_by_role("button", name="Reset zoom").click()
    expect(chart).to_have_attribute("data-zoomed", "false")
    # Dragging across the plot selects a range of rounds (uPlot's selection).
    plot = chart.locator(".u-over")
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    expect(chart).to_have_attribute("data-zoomed", "true")
    tools.get_by_label("Log scale").check()
    expect(chart).to_have_attribute("data-log", "true")
    expect(chart.locator("canvas")).to_have_count(1)
