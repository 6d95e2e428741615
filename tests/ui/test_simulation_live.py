"""A simulation watched live in the browser while its websocket is cut and restored: the page
resumes from its last seq and shows every round once; a launch on the busy population is
refused at the field."""

from __future__ import annotations

import contextlib
import json
import re
import threading

import pytest
from playwright.sync_api import expect

from tests.support import wait_for
from tests.ui.support import deploy_education_study, sign_in

pytestmark = pytest.mark.browser

ROUNDS = 10
# Each round lasts about this long (the synthetic policy's stand-in for an LLM call).
LATENCY_S = 1.5


class Observer:
    """A websocket that stays connected throughout, read in a thread: what the page should get."""

    def __init__(self, manager, topics: str) -> None:
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(manager.events(topics=topics))
        self.ws.recv(timeout=10)  # hello
        self.events: list[dict] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):
            for message in self.ws:
                self.events.append(json.loads(message))

    def close(self) -> None:
        self._stack.close()


def _rounds_stored(manager, sid: int) -> int:
    with manager.api() as api:
        return len(api.get(f"/api/simulations/{sid}/rounds").json()["items"])


def _poll(page, predicate, what: str, timeout_ms: int = 30_000):
    """Wait while letting Playwright dispatch its handlers (a sleep would not)."""
    for _ in range(timeout_ms // 100):
        if predicate():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_cut_websocket_resumes_with_every_round_once(page, manager, dashboard_built, screenshot):
    pid = deploy_education_study(manager)
    with manager.api() as api:
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": pid,
                "name": "slow synthetic",
                "rounds": ROUNDS,
                "policy": {"kind": "synthetic", "latency_s": LATENCY_S},
                "segment_by": ["education"],
                "seed": 5,
            },
        )
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]

    observer = Observer(manager, f"simulation:{sid}")
    # Every socket of the page goes through here; frames are kept per connection.
    sockets, servers, frames = [], {}, []
    closed_by_page: set[int] = set()
    cut_by_test: set[int] = set()
    gate = {"open": True}

    def route(ws):
        if not gate["open"]:
            ws.close(code=1013, reason="test: the manager is unreachable")
            return
        # The index is taken before connecting: Playwright may run another socket's route
        # while this one connects, and two sockets must never share an index.
        index = len(sockets)
        sockets.append(ws)
        server = ws.connect_to_server()
        servers[index] = server

        def to_page(message):
            # A frame dispatched after the test cut this socket never reaches the page.
            if index in cut_by_test:
                return
            frames.append((index, json.loads(message)))
            ws.send(message)

        server.on_message(to_page)

        def page_closed(code, reason):
            # A page that mounts twice (a lazy chunk loading) drops its first socket at once.
            closed_by_page.add(index)
            server.close(code=code, reason=reason)

        ws.on_close(page_closed)

    page.route_web_socket(re.compile(r"/ws/events"), route)
    rounds_requests = []
    page.on(
        "request",
        lambda r: (
            r.url.endswith(f"/api/simulations/{sid}/rounds?limit=1000")
            and rounds_requests.append(r.url)
        ),
    )

    sign_in(page, manager)
    page.evaluate("window.__noReload = true")
    nav = page.get_by_role("navigation", name="Main")
    nav.get_by_role("link", name="Simulations").click()
    listed = page.get_by_role("row", name=f"Simulation {sid}", exact=True)
    expect(listed.get_by_text("running", exact=True)).to_be_visible(timeout=30_000)

    # A second simulation on the busy population is refused, and the form says why at the field.
    page.get_by_role("link", name="New simulation").click()
    form = page.locator("#launch-simulation")
    form.get_by_label("Policy").select_option("synthetic")
    form.get_by_role("button", name="Launch simulation").click()
    population = form.get_by_label("Population")
    expect(population).to_have_attribute("aria-invalid", "true")
    expect(population).to_have_accessible_description(
        f"population {pid} is busy: simulation {sid} is running"
    )
    screenshot("simulations-busy-population")
    form.get_by_role("button", name="Cancel").click()

    listed.get_by_role("link", name="slow synthetic").click()
    expect(page.get_by_role("heading", name="slow synthetic")).to_be_visible()
    live = page.get_by_role("status", name="Live updates")
    expect(live).to_have_text("live")
    detail = max(
        n
        for n, ws in enumerate(sockets)
        if f"topics=simulation%3A{sid}" in ws.url and n not in closed_by_page
    )
    assert f"topics=simulation%3A{sid}" in sockets[detail].url
    table = page.get_by_role("table", name="Rounds", exact=True)
    rows = table.locator("tbody tr")
    # The round in play shows its progress; a round completes and appears without a reload.
    expect(page.get_by_role("progressbar", name="Round progress")).to_be_visible()
    expect(rows).not_to_have_count(0, timeout=30_000)
    seen_before_cut = rows.count()
    assert seen_before_cut < ROUNDS - 2, "the cut must come with rounds still to play"
    screenshot("simulation-live")

    # Cut the page's socket; while it is away, two more rounds complete on the manager.
    gate["open"] = False
    cut_by_test.add(detail)
    # Taken after the cut: the last frame forwarded to the page is the last one it saw.
    last_seq = max(f["seq"] for n, f in frames if n == detail)
    # Both sides: with an on_close handler, Playwright no longer closes one with the other.
    servers[detail].close()
    sockets[detail].close(code=4000, reason="test cuts the socket")
    expect(live).to_have_text("reconnecting…")
    page.wait_for_timeout(300)  # events already in the page are applied within 100 ms
    at_cut = rows.count()
    _poll(page, lambda: _rounds_stored(manager, sid) >= at_cut + 2, "two rounds while offline")
    # Nothing reached the page meanwhile: those rounds can only come back through the replay.
    expect(rows).to_have_count(at_cut)
    screenshot("simulation-reconnecting")
    gate["open"] = True

    _poll(page, lambda: len(sockets) > detail + 1, "the page reconnected")
    resumed = sockets[detail + 1]
    assert f"since={last_seq}&" in resumed.url and "epoch=" in resumed.url, resumed.url
    expect(live).to_have_text("live")
    expect(page.get_by_role("main").get_by_text("completed", exact=True)).to_be_visible(
        timeout=60_000
    )
    expect(rows).to_have_count(ROUNDS)
    shown = [int(n) for n in rows.locator("td:first-child").all_inner_texts()]
    assert shown == list(range(1, ROUNDS + 1)), f"every round once, in order: {shown}"
    expect(page.get_by_test_id("current-round")).to_contain_text(f"{ROUNDS} of {ROUNDS}")
    # Finished reads as finished without a reload: the update event carries the times.
    expect(page.get_by_test_id("run-finished")).not_to_have_text("not yet")
    expect(page.get_by_test_id("run-duration")).not_to_contain_text("so far")

    hello = next(f for n, f in frames if n == detail + 1 and f["type"] == "hello")
    assert hello["payload"]["replayed"] >= 2, hello
    replayed = [f for n, f in frames if n == detail + 1 and f["type"] != "hello"]
    assert replayed[0]["seq"] > last_seq
    # Against a socket that never dropped: the page got every event of its topic, none twice.
    wait_for(
        lambda: any(e["payload"].get("status") == "completed" for e in observer.events),
        15,
        what="the observer saw the end",
    )
    got = [f["seq"] for n, f in frames if n in (detail, detail + 1) and f["type"] != "hello"]
    per_socket = {n: [f["seq"] for m, f in frames if m == n] for n in range(len(sockets))}
    assert got == [e["seq"] for e in observer.events if e["seq"] >= got[0]], (
        f"sockets {[ws.url for ws in sockets]}, detail={detail}, seqs per socket {per_socket}"
    )
    completed = [f["payload"]["round"] for f in replayed if f["type"] == "round.completed"]
    assert len(completed) == len(set(completed)) and set(completed) >= set(
        range(at_cut + 1, at_cut + 3)
    ), completed
    assert not any(f["type"] == "resync" for _, f in frames)
    assert len(rounds_requests) == 1, f"the page refetched instead of resuming: {rounds_requests}"
    for chart in ("rounds-chart", "histogram-chart"):
        expect(page.get_by_test_id(chart)).to_have_attribute("data-charts-created", "1")
    assert page.evaluate("window.__noReload") is True
    screenshot("simulation-resumed")
    observer.close()


def test_cancel_stops_a_running_simulation(page, manager, dashboard_built, screenshot):
    pid = deploy_education_study(manager)
    with manager.api() as api:
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": pid,
                "rounds": 50,
                "policy": {"kind": "synthetic", "latency_s": 1.0},
            },
        )
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
    sign_in(page, manager)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Simulations").click()
    page.get_by_role("row", name=f"Simulation {sid}", exact=True).get_by_role("link").first.click()
    main = page.get_by_role("main")
    expect(main.get_by_text("running", exact=True)).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="Cancel simulation").click()
    dialog = page.get_by_role("dialog", name=f"Cancel simulation {sid}?")
    dialog.get_by_role("button", name="Keep running").click()
    expect(dialog).to_be_hidden()
    expect(main.get_by_text("running", exact=True)).to_be_visible()
    page.get_by_role("button", name="Cancel simulation").click()
    dialog.get_by_role("button", name="Cancel simulation").click()
    expect(main.get_by_text("cancelled", exact=True)).to_be_visible(timeout=30_000)
    # The status event may arrive before the cancel request answers and closes the dialog.
    expect(dialog).to_be_hidden(timeout=30_000)
    expect(page.get_by_role("button", name="Cancel simulation")).to_have_count(0)
    expect(page.get_by_role("progressbar", name="Round progress")).to_have_count(0)
    with manager.api() as api:
        done = api.get(f"/api/simulations/{sid}").json()
    assert done["status"] == "cancelled" and done["current_round"] < 50
    screenshot("simulation-cancelled")

    # A finished run can be deleted, with its rounds and decisions, after a confirmation.
    page.get_by_role("button", name="Delete simulation").click()
    deleting = page.get_by_role("dialog", name=f"Delete simulation {sid}?")
    deleting.get_by_role("button", name="Keep it").click()
    expect(deleting).to_be_hidden()
    page.get_by_role("button", name="Delete simulation").click()
    deleting.get_by_role("button", name="Delete simulation").click()
    expect(page).to_have_url(re.compile(r"/simulations$"), timeout=30_000)
    expect(page.get_by_role("row", name=f"Simulation {sid}", exact=True)).to_have_count(0)
    with manager.api() as api:
        assert api.get(f"/api/simulations/{sid}").status_code == 404

    # A launch link to a population that does not exist says so, not silently another one.
    page.goto(f"{manager.url}/simulations?launch=1&population=987654")
    expect(page.get_by_role("alert")).to_contain_text(
        "Population 987654 cannot be launched on: it was deleted or is not deployed"
    )
    expect(page.locator("#launch-simulation")).to_be_visible()
