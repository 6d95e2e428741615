"""Every page names a run's population the same way (issue 15): "education-study #3", with
hosted vs size while it is degraded, and "(deleted)" once it is gone. Made for real: one of the
two worker nodes hosting the population is SIGKILLed and the survivor has room for only part of
its agents, so the population is degraded."""

from __future__ import annotations

import os
import signal

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.support_populations import YAML
from tests.ui.support import EDUCATION_STUDY, sign_in

pytestmark = pytest.mark.browser

# Each worker hosts at most 600 agents: the population of 1,000 splits over two, and the
# survivor of one being killed takes 100 more of the dead one's 500.
CAPACITY = 600
# The keeper notices the dead worker and re-places its agents within seconds.
FAST = {"POPULACE_REAPER_INTERVAL_S": "1", "POPULACE_REPLACE_AFTER_S": "2"}
HOSTED = "600 of 1,000 agents hosted"
FINAL = ("completed", "failed", "cancelled")

SWEEP = """name: names-sweep
mode: sequence
populations: [{pid}]
base:
  rounds: 1
  policy: {{kind: synthetic}}
grid:
  seed: [1, 2]
"""


def _online(manager) -> list[dict]:
    return manager.workers(state="online")


def _run(api, pid: int, name: str) -> int:
    resp = api.post(
        "/api/simulations",
        json={"population_id": pid, "name": name, "rounds": 1, "policy": {"kind": "synthetic"}},
    )
    assert resp.status_code == 202, resp.text
    sid = resp.json()["id"]
    wait_for(
        lambda: api.get(f"/api/simulations/{sid}").json()["status"] in FINAL, 60, what=f"{name}"
    )
    assert api.get(f"/api/simulations/{sid}").json()["status"] == "completed"
    return sid


def test_a_degraded_population_is_named_with_its_hosting_on_every_page(
    page, manager_factory, dashboard_built, screenshot
):
    manager = manager_factory(extra_env={"POPULACE_CAPACITY": str(CAPACITY), **FAST}).start()
    doomed = manager.start_workers(procs=1, node="node-a", start_new_session=True)
    manager.start_workers(procs=1, node="node-b", start_new_session=True)
    wait_for(lambda: len(_online(manager)) == 2, 60, what="two workers online")
    with manager.api() as api:
        resp = api.post("/api/populations", content=EDUCATION_STUDY, headers=YAML)
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed",
            60,
            what="deployed",
        )
        first, second = _run(api, pid, "first run"), _run(api, pid, "second run")
        resp = api.post(
            "/api/sweeps",
            content=SWEEP.format(pid=pid),
            headers={"Content-Type": "application/yaml"},
        )
        assert resp.status_code == 202, resp.text
        sweep = resp.json()["id"]
        assert resp.json()["populations"] == [pid]
        wait_for(
            lambda: api.get(f"/api/sweeps/{sweep}").json()["status"] in FINAL, 60, what="sweep"
        )
        agent = api.get("/api/agents", params={"population_id": pid, "limit": 1}).json()["items"][0]

        # Both workers host agents of it; one node dies without a word.
        assert len(api.get(f"/api/populations/{pid}").json()["agents_per_worker"]) == 2
        os.killpg(doomed.pid, signal.SIGKILL)
        degraded = wait_for(
            lambda: (
                (p := api.get(f"/api/populations/{pid}").json())["status"] == "degraded"
                and p["hosted"] == 600
                and p
            ),
            60,
            what="the population degraded with 600 of 1,000 hosted",
        )
    assert degraded["size"] == 1000

    sign_in(page, manager)

    # The run's page: its facts and its breadcrumb name the population.
    page.goto(f"{manager.url}/simulations/{first}")
    expect(page.get_by_role("heading", name="first run")).to_be_visible()
    facts = page.locator("dl.facts").first
    expect(facts.get_by_role("link", name="education-study")).to_have_attribute(
        "href", f"/populations/{pid}"
    )
    expect(facts).to_contain_text(f"#{pid}")
    expect(facts).to_contain_text(HOSTED)
    crumbs = page.locator(".breadcrumb")
    expect(crumbs.get_by_role("link", name="education-study")).to_have_attribute(
        "href", f"/simulations?population_id={pid}"
    )
    expect(page.get_by_role("main")).not_to_contain_text(f"Population {pid}")
    screenshot("names-1-simulation-degraded")

    # The compare page: a Population column.
    page.goto(f"{manager.url}/compare?ids={first},{second}")
    for sid in (first, second):
        row = page.get_by_role("table", name="Compared runs").get_by_role("row", name=f"Run {sid}")
        expect(row.get_by_role("link", name="education-study")).to_be_visible()
        expect(row).to_contain_text(HOSTED)
    screenshot("names-2-compare-degraded")

    # The sweep: what it runs on, and each point's population.
    page.goto(f"{manager.url}/sweeps/{sweep}")
    on = page.get_by_label("Sweep populations")
    expect(on.get_by_role("link", name="education-study")).to_be_visible()
    expect(on).to_contain_text(HOSTED)
    point = page.get_by_role("table", name="Results").get_by_role("row", name="Point 1")
    expect(point.get_by_role("link", name="education-study")).to_be_visible()
    expect(point).to_contain_text(HOSTED)
    screenshot("names-3-sweep-degraded")

    # The sweeps list names it too.
    page.goto(f"{manager.url}/sweeps")
    listed = page.get_by_role("table", name="All sweeps").get_by_role("row", name="names-sweep")
    expect(listed.get_by_role("link", name="education-study")).to_be_visible()
    expect(listed).to_contain_text(HOSTED)

    # An agent's page: breadcrumb and placement.
    page.goto(f"{manager.url}/agents/{agent['id']}")
    expect(page.get_by_role("heading", name=f"Agent {agent['id']}")).to_be_visible()
    expect(page.locator(".breadcrumb").get_by_role("link", name="education-study")).to_be_visible()
    expect(page.locator("dl.facts").first).to_contain_text(HOSTED)

    # Deleted, the runs keep naming it, and say it is gone instead of linking to it.
    with manager.api() as api:
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            60,
            what="the population deleted",
        )
    page.goto(f"{manager.url}/simulations/{first}")
    facts = page.locator("dl.facts").first
    expect(facts).to_contain_text(f"education-study #{pid} (deleted)")
    expect(facts.locator(f'a[href="/populations/{pid}"]')).to_have_count(0)
    page.goto(f"{manager.url}/compare?ids={first},{second}")
    row = page.get_by_role("table", name="Compared runs").get_by_role("row", name=f"Run {first}")
    expect(row).to_contain_text(f"education-study #{pid} (deleted)")
    screenshot("names-4-deleted")
