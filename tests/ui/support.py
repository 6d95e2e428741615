"""What the browser tests share: signing in, finding a table row, the axe check, and the
populations and runs they set up through the API before opening a page."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.support import ROOT, wait_for
from tests.support_populations import deploy_population, population_text
from tests.support_simulations import FINAL

EDUCATION_STUDY = population_text("education-study")
# Small: every agent of an LLM run is a request to the fake server, on a shared 2-core box.
WORKBENCH_STUDY = population_text("workbench-study")

AXE = ROOT / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
FAILING = ("serious", "critical")


def sign_in(page, manager):
    page.goto(manager.url)
    page.get_by_label("API token").fill(manager.api_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Cluster")).to_be_visible()


def table_row(page, table, name):
    return page.get_by_role("table", name=table, exact=True).get_by_role(
        "row", name=name, exact=True
    )


def describe_violations(violations: list[dict]) -> str:
    """Each violation with its distinct failures (one sample element each): a contrast failure
    on 130 elements is usually three colour pairs."""
    lines = []
    for v in violations:
        lines.append(f"[{v['impact']}] {v['id']}: {v['help']} ({len(v['nodes'])} elements)")
        seen: dict[str, str] = {}
        for node in v["nodes"]:
            summary = " ".join((node.get("failureSummary") or "").split())
            seen.setdefault(summary, " > ".join(map(str, node["target"])))
        for summary, target in list(seen.items())[:12]:
            lines.append(f"    {target}: {summary[:260]}")
    return "\n".join(lines)


def no_serious_axe_violations(page, name: str) -> None:
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    failing = [v for v in violations if v["impact"] in FAILING]
    assert not failing, (
        f"{name}: serious or critical axe violations:\n{describe_violations(failing)}"
    )


def deploy_on_two_workers(manager, config: str) -> int:
    """Two worker processes started, then `config` deployed on them: its id."""
    manager.start_workers(procs=2)
    wait_for(lambda: len(manager.workers(state="online")) == 2, 60, what="two workers online")
    with manager.api() as api:
        return deploy_population(api, config)["id"]


def deploy_workbench_study(manager) -> int:
    return deploy_on_two_workers(manager, WORKBENCH_STUDY)


def deploy_education_study(manager) -> int:
    return deploy_on_two_workers(manager, EDUCATION_STUDY)


def launch(api, body: dict) -> int:
    resp = api.post("/api/simulations", json=body)
    assert resp.status_code == 202, resp.text
    return resp.json()["id"]


def finished(api, sid: int, timeout: float = 120) -> dict:
    return wait_for(
        lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] in FINAL and s,
        timeout,
        what=f"simulation {sid} finished",
    )


def synthetic_run(pid: int, name: str, seed: int, rounds: int, latency_s: float = 0.0) -> dict:
    return {
        "population_id": pid,
        "name": name,
        "rounds": rounds,
        "policy": {"kind": "synthetic", "latency_s": latency_s},
        "segment_by": ["education"],
        "seed": seed,
    }
