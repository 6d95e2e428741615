"""axe-core on every page of the dashboard, in the light and the dark theme, at 1440 and 390 px:
no serious or critical violation (contrast, names, labels, ARIA, keyboard-reachable scrolling).

One manager, one worker, one small population, one short run and one tiny sweep are made once
for the module; each theme and width gets one browser context (the theme through the
system preference, which the dashboard follows by default), visiting every page in turn.
axe-core is the frontend's devDependency (frontend/node_modules/axe-core), injected per page.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support import ROOT, running_cluster, wait_for
from tests.support_populations import YAML
from tests.ui.support import (
    AXE,
    FAILING,
    WORKBENCH_STUDY,
    describe_violations,
    finished,
    launch,
    synthetic_run,
)

pytestmark = pytest.mark.browser

TOKEN_KEY = "populace.apiToken"
VIEWS = [("light", 1440), ("dark", 1440), ("light", 390), ("dark", 390)]
SWEEP = """name: a11y-sweep
mode: sequence
populations: [{pid}]
base:
  rounds: 2
  policy: {{kind: synthetic}}
grid:
  seed: [1, 2]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A manager with one worker, a deployed population, a finished run and a finished sweep."""
    assert AXE.is_file(), f"{AXE} is missing: cd frontend && npm ci"
    tmp = tmp_path_factory.mktemp("a11y")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db", procs=1) as manager:
        with manager.api() as api:
            resp = api.post("/api/populations", content=WORKBENCH_STUDY, headers=YAML)
            assert resp.status_code == 202, resp.text
            pid = resp.json()["id"]
            wait_for(
                lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed",
                60,
                what="population deployed",
            )
            run = launch(api, synthetic_run(pid, "a11y run", seed=3, rounds=3))
            assert finished(api, run)["status"] == "completed"
            resp = api.post("/api/sweeps", content=SWEEP.format(pid=pid), headers=YAML)
            assert resp.status_code in (201, 202), resp.text
            sweep = resp.json()["id"]
            wait_for(
                lambda: api.get(f"/api/sweeps/{sweep}").json()["status"] == "completed",
                120,
                what="sweep completed",
            )
            sweep_runs = [
                r["simulation_id"]
                for r in api.get(f"/api/sweeps/{sweep}").json()["results"]["items"]
            ]
            worker = manager.workers()[0]["id"]
            agent = api.get("/api/agents", params={"population_id": pid, "limit": 1}).json()[
                "items"
            ][0]["id"]
        yield {
            "manager": manager,
            "population": pid,
            "run": run,
            "sweep": sweep,
            "sweep_runs": sweep_runs,
            "worker": worker,
            "agent": agent,
        }


@pytest.fixture(scope="module", params=VIEWS, ids=[f"{t}-{w}" for t, w in VIEWS])
def view(request, browser, site):
    """One signed-in page per theme and width, reused by every page of the module."""
    theme, width = request.param
    context = browser.new_context(
        viewport={"width": width, "height": 900}, color_scheme=theme, base_url=site["manager"].url
    )
    page = context.new_page()
    page.goto("/login-first")
    page.evaluate(f"localStorage.setItem('{TOKEN_KEY}', '{site['manager'].api_token}')")
    yield {"page": page, "theme": theme, "width": width}
    context.close()


def _ready(page, heading: str | re.Pattern) -> None:
    expect(page.locator("main h1")).to_have_text(heading)
    expect(page.locator("main").get_by_text("Loading…", exact=True)).to_have_count(0)


def _visit(page, site, name: str) -> None:
    """Opens one page and waits until its data is on screen."""
    s = site
    if name == "login":
        page.evaluate(f"localStorage.removeItem('{TOKEN_KEY}')")
        page.goto("/")
        _ready(page, "Sign in")
        return
    page.evaluate(f"localStorage.setItem('{TOKEN_KEY}', '{s['manager'].api_token}')")
    if name == "cluster":
        page.goto("/cluster")
        _ready(page, "Cluster")
        expect(page.get_by_role("table").first).to_be_visible()
    elif name == "worker":
        page.goto(f"/workers/{s['worker']}")
        _ready(page, f"Worker {s['worker']}")
    elif name == "populations":
        page.goto("/populations")
        _ready(page, "Populations")
        expect(page.get_by_role("link", name="workbench-study").first).to_be_visible()
    elif name == "population":
        page.goto(f"/populations/{s['population']}")
        _ready(page, "workbench-study")
    elif name == "agent":
        page.goto(f"/agents/{s['agent']}")
        _ready(page, re.compile(r"^Agent "))
    elif name == "runs":
        page.goto("/simulations")
        _ready(page, "Simulations")
        expect(page.get_by_role("link", name="a11y run").first).to_be_visible()
    elif name == "run":
        page.goto(f"/simulations/{s['run']}")
        _ready(page, "a11y run")
        expect(page.get_by_test_id("rounds-chart").locator("canvas")).to_have_count(1)
    elif name == "compare":
        ids = ",".join(map(str, [s["run"], *s["sweep_runs"]]))
        page.goto(f"/compare?ids={ids}")
        _ready(page, "Compare runs")
        expect(page.get_by_role("table", name="Config differences")).to_be_visible()
    elif name == "sweeps":
        page.goto("/sweeps")
        _ready(page, "Sweeps")
        expect(page.get_by_role("link", name="a11y-sweep").first).to_be_visible()
    elif name == "sweep":
        page.goto(f"/sweeps/{s['sweep']}")
        _ready(page, "a11y-sweep")
        expect(page.get_by_role("table", name="Results")).to_be_visible()
    elif name == "launch":
        page.goto("/simulations")
        _ready(page, "Simulations")
        # The launch form: opened in the page, or its own page (/simulations/new).
        new = page.get_by_role("button", name="New simulation").or_(
            page.get_by_role("link", name="New simulation")
        )
        new.click()
        expect(page.locator("main form").first).to_be_visible()
        expect(page.locator("main").get_by_text("Loading…", exact=True)).to_have_count(0)
    elif name == "api-docs":
        page.goto("/api/docs")
        _ready(page, "API")
        expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    else:
        raise AssertionError(f"no such page {name}")


PAGES = [
    "login",
    "cluster",
    "worker",
    "populations",
    "population",
    "agent",
    "runs",
    "run",
    "compare",
    "sweeps",
    "sweep",
    "launch",
    "api-docs",
]


@pytest.mark.parametrize("name", PAGES)
def test_no_serious_axe_violations(view, site, dashboard_built, name):
    page = view["page"]
    _visit(page, site, name)
    assert page.evaluate("document.documentElement.dataset.theme") == view["theme"]
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    failing = [v for v in violations if v["impact"] in FAILING]
    assert not failing, (
        f"{name} ({view['theme']}, {view['width']} px) has {len(failing)} serious or critical "
        f"axe violations:\n{describe_violations(failing)}"
    )


def test_axe_is_the_pinned_dev_dependency():
    package = json.loads((ROOT / "frontend" / "package.json").read_text())
    assert "axe-core" in package["devDependencies"]


def _signed_in(browser, site, width: int, theme: str = "light"):
    context = browser.new_context(
        viewport={"width": width, "height": 900}, color_scheme=theme, base_url=site["manager"].url
    )
    page = context.new_page()
    page.goto("/login-first")
    page.evaluate(f"localStorage.setItem('{TOKEN_KEY}', '{site['manager'].api_token}')")
    return context, page


def test_keyboard_skips_to_content_chooses_a_theme_and_reads_the_run_charts(
    browser, site, dashboard_built
):
    context, page = _signed_in(browser, site, 1440)
    try:
        page.goto(f"/simulations/{site['run']}")
        _ready(page, "a11y run")
        # The first Tab offers to skip the header; Enter lands in the page's main.
        page.keyboard.press("Tab")
        skip = page.get_by_role("link", name="Skip to content")
        expect(skip).to_be_focused()
        expect(skip).to_be_in_viewport()
        page.keyboard.press("Enter")
        expect(page.locator("main")).to_be_focused()

        # The theme: a named select, remembered, and applied before any script of the bundle.
        theme = page.get_by_role("combobox", name="Theme")
        expect(theme).to_have_value("system")
        theme.focus()
        theme.select_option("dark")
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        assert page.evaluate("localStorage.getItem('populace.theme')") == "dark"
        page.route("**/assets/*.js", lambda route: route.abort())
        page.reload()
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        assert (
            page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
            == "rgb(17, 21, 30)"
        )
        page.unroute("**/assets/*.js")
        page.reload()
        page.get_by_role("combobox", name="Theme").select_option("system")
        expect(page.locator("html")).to_have_attribute("data-theme", "light")
        assert page.evaluate("localStorage.getItem('populace.theme')") is None

        # The run's charts read point by point from the keyboard, like the cluster sparklines.
        with site["manager"].api() as api:
            rounds = api.get(f"/api/simulations/{site['run']}/rounds").json()["items"]
        chart = page.get_by_role("group", name=re.compile(r"^Mean, target and winner"))
        readout = page.get_by_test_id("rounds-chart-readout")
        chart.focus()
        expect(readout).to_contain_text(f"Round {rounds[-1]['round']}: Mean ")
        page.keyboard.press("Home")
        first = rounds[0]
        expect(readout).to_contain_text(
            f"Round 1: Mean {first['mean']:,.2f}".rstrip("0").rstrip(".")
        )
        page.keyboard.press("ArrowRight")
        expect(readout).to_contain_text("Round 2: ")
        page.keyboard.press("Escape")
        expect(readout).to_have_text("")
        histogram = page.get_by_test_id("histogram-chart")
        histogram.focus()
        expect(page.get_by_test_id("histogram-chart-readout")).to_contain_text("Agents ")
        # Parquet exports beside CSV and JSONL, its size in a unit that fits.
        with page.expect_download() as download:
            page.get_by_role("button", name="Export Parquet").click()
        assert download.value.suggested_filename.endswith(".parquet")
        expect(page.get_by_role("status", name="Export result")).to_have_text(
            re.compile(r"^Downloaded \S+\.parquet \(\d+(\.\d)? (B|KiB|MiB)\)$")
        )
        # The tab's icon.
        icon = page.locator("link[rel=icon]").get_attribute("href")
        assert page.request.get(icon).headers["content-type"].startswith("image/svg+xml")
    finally:
        context.close()


def test_the_phone_header_is_one_slim_row_with_a_menu(browser, site, dashboard_built):
    context, page = _signed_in(browser, site, 390, theme="dark")
    try:
        page.goto("/populations")
        _ready(page, "Populations")
        header = page.locator("header.app-header")
        assert header.bounding_box()["height"] <= 56
        nav = page.get_by_role("navigation", name="Main")
        expect(nav).to_be_hidden()
        menu = page.get_by_role("button", name="Menu")
        expect(menu).to_have_attribute("aria-expanded", "false")
        menu.click()
        expect(menu).to_have_attribute("aria-expanded", "true")
        expect(page.get_by_role("combobox", name="Theme")).to_be_visible()
        nav.get_by_role("link", name="Sweeps").click()
        _ready(page, "Sweeps")
        expect(nav).to_be_hidden()
        expect(menu).to_have_attribute("aria-expanded", "false")

        # A sweep's params stay on one line (cut, whole in the tooltip), not a letter per line.
        page.goto(f"/sweeps/{site['sweep']}")
        params = page.get_by_role("table", name="Results").locator("tbody code").first
        expect(params).to_contain_text("seed=")
        line = page.evaluate("parseFloat(getComputedStyle(document.body).lineHeight)")
        assert params.bounding_box()["height"] < 1.5 * line

        # An empty state says what to do next.
        page.goto("/simulations?q=nothing-is-called-this")
        page.get_by_role("link", name="Clear the filters").click()
        expect(page.get_by_role("link", name="a11y run").first).to_be_visible()
    finally:
        context.close()


def test_a_run_that_finishes_elsewhere_says_so(browser, site, dashboard_built):
    context, page = _signed_in(browser, site, 1440)
    try:
        page.goto("/populations")
        _ready(page, "Populations")
        # The notices listen on the event socket: wait until it is open before launching.
        expect(page.locator(".connection-live").first).to_be_visible()
        # As if the reader were on another tab: the tab's title says what happened.
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {get: () => true, configurable: true})"
        )
        with site["manager"].api() as api:
            sid = launch(api, synthetic_run(site["population"], "noticed run", seed=9, rounds=2))
            assert finished(api, sid)["status"] == "completed"
        notice = page.locator(".run-notice").filter(has_text="noticed run completed")
        expect(notice).to_be_visible()
        expect(page).to_have_title("✓ noticed run completed · Populations · populace")
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {get: () => false, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        expect(page).to_have_title("Populations · populace")
        notice.get_by_role("link", name="Open the run").click()
        expect(page).to_have_url(re.compile(rf"/simulations/{sid}$"))
        expect(page.locator(".run-notice")).to_have_count(0)
    finally:
        context.close()
