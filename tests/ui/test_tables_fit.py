"""Wide tables fit a 1440 px screen: each column's header is on screen or reachable by
scrolling its table's frame (a labelled region the keyboard can focus), and the first column,
the row's name, stays in view while the rest scrolls."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.ui.support import deploy_workbench_study, finished, launch, sign_in, synthetic_run

pytestmark = pytest.mark.browser

# Every table on the page, measured: its frame's box, whether the frame scrolls and can be
# focused, and where its first and last headers sit before and after scrolling to the end.
MEASURE = """() => [...document.querySelectorAll('main table.data')].map((table) => {
  const wrap = table.closest('.table-wrap');
  const heads = [...table.querySelectorAll('thead th')];
  const box = (el) => { const r = el.getBoundingClientRect(); return {left: r.left, right: r.right}; };
  const overflows = wrap.scrollWidth > wrap.clientWidth + 1;
  const before = heads.map(box);
  wrap.scrollLeft = wrap.scrollWidth;
  const after = heads.map(box);
  const frame = box(wrap);
  wrap.scrollLeft = 0;
  return {
    name: table.getAttribute('aria-label') || table.getAttribute('aria-labelledby'),
    overflows,
    role: wrap.getAttribute('role'),
    region: wrap.getAttribute('aria-label'),
    tabIndex: wrap.tabIndex,
    overflowX: getComputedStyle(wrap).overflowX,
    frame, before, after,
    viewport: window.innerWidth,
  };
})"""


def _check_tables(page) -> list[dict]:
    tables = page.evaluate(MEASURE)
    assert tables, "no tables on the page"
    for t in tables:
        name = t["name"]
        if not t["overflows"]:
            # It fits: every header is on screen.
            for h in t["before"]:
                assert h["left"] >= 0 and h["right"] <= t["viewport"] + 0.5, (name, h)
            continue
        # It scrolls: a labelled, focusable region, and the last header comes into its frame.
        assert t["overflowX"] in ("auto", "scroll"), t
        assert t["role"] == "region" and t["region"], t
        assert t["tabIndex"] == 0, t
        assert t["frame"]["right"] <= t["viewport"] + 0.5, t
        last = t["after"][-1]
        assert (
            t["frame"]["left"] - 0.5 <= last["left"] and last["right"] <= t["frame"]["right"] + 0.5
        ), (name, last)
        # The first (name) column is pinned: still at the frame's left edge after scrolling.
        first_before, first_after = t["before"][0], t["after"][0]
        assert abs(first_after["left"] - first_before["left"]) < 1, (
            name,
            first_before,
            first_after,
        )
        assert t["frame"]["left"] - 0.5 <= first_after["left"] <= t["frame"]["left"] + 2, (
            name,
            first_after,
        )
    return tables


def test_compare_and_runs_tables_fit_1440(browser, manager, dashboard_built):
    pid = deploy_workbench_study(manager)
    long = "a run with a long descriptive name for the table to fit"
    with manager.api() as api:
        ids = []
        for i in range(6):  # one run at a time on a population
            ids.append(launch(api, synthetic_run(pid, f"{long} {i}", seed=i, rounds=2)))
            assert finished(api, ids[-1])["status"] == "completed"

    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    try:
        sign_in(page, manager)
        page.goto(f"{manager.url}/compare?ids={','.join(map(str, ids))}")
        runs = page.get_by_role("table", name="Compared runs")
        expect(runs.get_by_role("row")).to_have_count(1 + len(ids))
        expect(page.get_by_role("table", name="Config differences")).to_be_visible()
        tables = _check_tables(page)
        assert any(t["overflows"] for t in tables), (
            "expected the six-run compare to scroll somewhere"
        )

        # The scrolling frame is a named region the keyboard reaches and scrolls.
        compared = next(t for t in tables if t["name"] == "Compared runs")
        if compared["overflows"]:
            region = page.get_by_role("region", name="Compared runs (scrolls sideways)")
            region.focus()
            expect(region).to_be_focused()
            for _ in range(5):
                page.keyboard.press("ArrowRight")
            wait_for(
                lambda: region.evaluate("el => el.scrollLeft") > 0,
                5,
                what="the region scrolled by keyboard",
            )
            # The run's name stays visible while scrolled.
            expect(runs.get_by_role("link", name=f"{long} 0")).to_be_in_viewport()
        # A cut name keeps its whole text in a tooltip.
        expect(runs.locator(f'[title="{long} 0 #{ids[0]}"]')).to_have_count(1)

        page.goto(f"{manager.url}/simulations")
        expect(page.get_by_role("table", name="All simulations").get_by_role("row")).to_have_count(
            1 + len(ids)
        )
        _check_tables(page)
        expect(page.get_by_role("columnheader", name="Created")).to_be_visible()
    finally:
        context.close()
