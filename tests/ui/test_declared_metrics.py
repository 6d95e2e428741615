"""A run's declared metrics on its page: one chart per declaration, titled, described and
valued from the round records as rounds arrive live, readable in light and dark mode; a run
from an older manager (no declarations, rounds without metrics) shows no such section."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

import pytest
from playwright.sync_api import expect

from tests.ui.support import deploy_education_study, sign_in

pytestmark = pytest.mark.browser

ROUNDS = 4
LATENCY_S = 1.0

# WCAG 2.x contrast of an element's text against the first opaque background behind it.
CONTRAST_JS = """(el) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let node = el, bg = null;
  while (node && node.nodeType === 1) {
    const c = rgb(getComputedStyle(node).backgroundColor);
    if (c.length >= 3 && (c.length < 4 || c[3] > 0.99)) { bg = c; break; }
    node = node.parentElement;
  }
  bg = bg || [255, 255, 255];
  const fg = rgb(getComputedStyle(el).color);
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  return (hi + 0.05) / (lo + 0.05);
}"""


def _shown(value, metric) -> str:
    """The dashboard's reading of a value: integers whole, numbers to 2 decimals, the unit."""
    if value is None:
        return "–"
    if metric["type"] == "integer":
        text = f"{round(value):,}"
    else:
        # As the browser's toLocaleString: the exact value, halves away from zero.
        exact = Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        text = f"{exact:,.2f}".rstrip("0").rstrip(".")
    unit = metric["unit"].strip()
    return f"{text} {unit}" if unit else text


def _check_contrast(page, figure) -> None:
    for part in (
        figure.locator(".metric-title"),
        figure.locator(".metric-help"),
        figure.get_by_test_id("metric-value").locator(".muted"),
        figure.get_by_test_id("metric-value").locator("strong"),
    ):
        ratio = part.evaluate(CONTRAST_JS)
        assert ratio >= 4.5, f"{part} has contrast {ratio:.2f}"


def test_the_declared_metrics_are_charted_live_and_absent_for_an_older_manager(
    page, manager, dashboard_built, screenshot
):
    pid = deploy_education_study(manager)
    with manager.api() as api:
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": pid,
                "name": "metrics",
                "rounds": ROUNDS,
                "policy": {"kind": "synthetic", "latency_s": LATENCY_S},
                "seed": 11,
            },
        )
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        declared = api.get(f"/api/simulations/{sid}").json()["metrics"]
    assert declared, "the run declares its metrics"
    integer = next(m for m in declared if m["type"] == "integer")
    number = next(m for m in declared if m["type"] == "number")

    sign_in(page, manager)
    page.goto(f"{manager.url}/simulations/{sid}")
    section = page.get_by_role("region", name="Metrics", exact=True)
    expect(section).to_be_visible(timeout=30_000)
    # One chart per declaration, named by its title, with its description as help.
    for metric in declared:
        figure = section.get_by_role("figure", name=metric["title"], exact=True)
        expect(figure).to_be_visible()
        if metric["description"]:
            expect(figure.get_by_text(metric["description"], exact=True)).to_be_visible()
        expect(figure.get_by_role("group")).to_have_attribute(
            "aria-label", re.compile("^" + re.escape(metric["title"]))
        )
    chart = section.get_by_role("figure", name=number["title"], exact=True).get_by_role("group")
    # Rounds arrive over the websocket: the page was opened before the last one finished.
    expect(chart).to_have_attribute(
        "aria-label", re.compile(rf" over {ROUNDS} rounds; round {ROUNDS}: "), timeout=60_000
    )
    expect(page.get_by_role("main").get_by_text("completed", exact=True)).to_be_visible(
        timeout=30_000
    )
    assert chart.get_attribute("data-charts-created") == "1", "one chart, fed live"

    with manager.api() as api:
        rounds = api.get(f"/api/simulations/{sid}/rounds").json()["items"]
    last, first = rounds[-1], rounds[0]
    assert last["round"] == ROUNDS
    # The captions show the latest round's values as the REST records have them.
    for metric in (integer, number):
        figure = section.get_by_role("figure", name=metric["title"], exact=True)
        value = figure.get_by_test_id("metric-value")
        expect(value).to_have_attribute("data-round", str(ROUNDS))
        expect(value.locator("strong")).to_have_text(
            _shown(last["metrics"][metric["name"]], metric)
        )
        expect(figure.get_by_role("group")).to_have_attribute(
            "aria-label",
            re.compile(
                re.escape(f"round {ROUNDS}: {_shown(last['metrics'][metric['name']], metric)};")
            ),
        )
    integer_value = section.get_by_role("figure", name=integer["title"], exact=True)
    assert re.fullmatch(
        r"[\d,]+" + (f" {re.escape(integer['unit'])}" if integer["unit"] else ""),
        integer_value.get_by_test_id("metric-value").locator("strong").inner_text(),
    ), "an integer metric reads whole, with its unit"

    # Choosing a round above shows that round's values.
    page.get_by_label("Show round").select_option("1")
    figure = section.get_by_role("figure", name=number["title"], exact=True)
    expect(figure.get_by_test_id("metric-value")).to_have_attribute("data-round", "1")
    expect(figure.get_by_test_id("metric-value").locator("strong")).to_have_text(
        _shown(first["metrics"][number["name"]], number)
    )
    # Hovering the chart shows a round's value in its legend (the tooltip).
    plot = figure.locator(".u-over")
    box = plot.bounding_box()
    assert box is not None
    plot.hover(position={"x": box["width"] - 2, "y": box["height"] / 2})
    expect(figure.locator(".u-legend")).to_contain_text(
        f"{_shown(last['metrics'][number['name']], number)} (round {ROUNDS})"
    )
    _check_contrast(page, figure)
    screenshot("declared-metrics-light")

    page.emulate_media(color_scheme="dark")
    page.reload()
    figure = section.get_by_role("figure", name=number["title"], exact=True)
    expect(figure.get_by_test_id("metric-value")).to_have_attribute(
        "data-round", "1", timeout=30_000
    )
    _check_contrast(page, figure)
    screenshot("declared-metrics-dark")
    page.emulate_media(color_scheme="light")

    # An older manager: no declarations on the detail, no metrics on the rounds.
    def strip_detail(route):
        response = route.fetch()
        body = response.json()
        body.pop("metrics", None)
        route.fulfill(response=response, json=body)

    def strip_rounds(route):
        response = route.fetch()
        body = response.json()
        for item in body["items"]:
            item.pop("metrics", None)
        route.fulfill(response=response, json=body)

    page.route(re.compile(rf".*/api/simulations/{sid}$"), strip_detail)
    page.route(re.compile(rf".*/api/simulations/{sid}/rounds(\?.*)?$"), strip_rounds)
    page.goto(f"{manager.url}/simulations/{sid}")
    expect(page.get_by_test_id("rounds-chart")).to_have_attribute(
        "aria-label", re.compile(rf"over {ROUNDS} rounds"), timeout=30_000
    )
    expect(page.get_by_role("heading", name="Rounds", exact=True)).to_be_visible()
    expect(page.get_by_role("region", name="Metrics", exact=True)).to_have_count(0)
    expect(page.get_by_test_id("metrics")).to_have_count(0)
