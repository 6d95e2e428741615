"""The launch form of a plugin drawn from its schema, in a real browser over a real manager and
worker: /simulations/new?plugin=public_goods shows the plugin's params (labels, defaults,
ranges, help) and its policies' params, refuses a bad value with an error summary that takes the
focus and names the field in words, then launches a run that completes."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.support_populations import YAML
from tests.ui.support import finished, sign_in

pytestmark = pytest.mark.browser

POPULATION = """name: commons
size: 20
seed: 3
distributions:
  - name: education
    categories:
      - {name: school, weight: 0.5}
      - {name: college, weight: 0.5}
persona:
  mode: template
  template: "You studied at {education}."
"""


def test_public_goods_launched_from_its_schema(page, manager, dashboard_built, screenshot):
    manager.start_workers(procs=1)
    wait_for(lambda: manager.workers(state="online"), 60, what="a worker online")
    with manager.api() as api:
        resp = api.post("/api/populations", content=POPULATION, headers=YAML)
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        wait_for(lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed", 60)
    sign_in(page, manager)
    page.goto(f"{manager.url}/simulations/new?plugin=public_goods")
    form = page.locator("#launch-simulation")

    # The plugin's params: title as label, default as value, range on the input and in the help.
    expect(form.get_by_label("Simulation")).to_have_value("public_goods")
    endowment = form.get_by_label("Endowment")
    expect(endowment).to_have_value("20")
    expect(endowment).to_have_attribute("min", "1")
    expect(endowment).to_have_attribute("max", "1000000")
    expect(endowment).to_have_accessible_description(
        re.compile("Tokens each agent holds every round. A whole number, 1 to 1,000,000")
    )
    expect(form.get_by_label("Group size")).to_have_value("10")
    expect(form.get_by_label("Multiplier")).to_have_accessible_description(
        re.compile("More than 0, at most 1,000")
    )
    # The default policy, its own params drawn from its schema; the run's limits from the
    # manager's config schema.
    expect(form.get_by_label("Policy")).to_have_value("conditional_cooperator")
    expect(form.get_by_label("First round")).to_have_value("0.5")
    expect(form.get_by_label("Rounds")).to_have_attribute("max", "1000")

    # A bad value: the summary at the top takes the focus and says it in the form's words,
    # its link leads to the field.
    endowment.fill("0")
    form.get_by_label("Rounds").fill("2")
    form.get_by_role("button", name="Launch simulation").click()
    summary = form.get_by_role("alert")
    expect(summary).to_be_focused()
    expect(summary).to_contain_text("Endowment must be between 1 and 1,000,000")
    expect(endowment).to_have_attribute("aria-invalid", "true")
    screenshot("plugin-launch-refused")
    summary.get_by_role("link", name="Endowment must be between 1 and 1,000,000").click()
    expect(endowment).to_be_focused()

    # The picker changes the URL (and the form: the guessing game's own).
    form.get_by_label("Simulation").select_option("guess")
    expect(page).to_have_url(re.compile(r"/simulations/new\?plugin=guess$"))
    expect(page.locator("#launch-simulation").get_by_label("Rule")).to_be_visible()
    page.locator("#launch-simulation").get_by_label("Simulation").select_option("public_goods")
    expect(page).to_have_url(re.compile(r"\?plugin=public_goods$"))

    form.get_by_label("Name (optional)").fill("commons run")
    form.get_by_label("Rounds").fill("2")
    form.get_by_label("Endowment").fill("30")
    form.get_by_label("First round").fill("0.2")
    form.get_by_role("button", name="Launch simulation").click()
    expect(page.get_by_role("heading", name="commons run")).to_be_visible()
    sid = int(page.url.rsplit("/", 1)[1])
    with manager.api() as api:
        done = finished(api, sid)
    assert done["status"] == "completed", done.get("error")
    assert done["config"]["plugin"] == {
        "name": "public_goods",
        "params": {"endowment": 30, "multiplier": 2.0, "group_size": 10},
    }
    assert done["config"]["policy"] == {"kind": "conditional_cooperator", "params": {"first": 0.2}}
