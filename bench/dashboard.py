"""The dashboard at 10^6 agents, in a real browser, with a round running.

Starts a real manager on a fresh Postgres database and a worker node with 2 processes, deploys
10^6 agents, and starts a long synthetic simulation (every agent waits `latency_s` per round,
then 10^6 decisions are stored), so a round is always running. Then, in Debian's Chromium
through Playwright:

- first meaningful paint of the dashboard (the Cluster page): navigation start to the frame
  after the workers table and its totals are in the DOM (a MutationObserver notes the commit,
  two requestAnimationFrames later is the paint), over fresh loads of the page;
- websocket round event to the DOM, on the simulation's page: for each `round.completed`, from
  the socket's message event (a listener the page gets before the app's) to the commit of that
  round's row, both on the page's clock; and, on the machine's wall clock, from the event's
  publish timestamp on the manager to the same commit;
- agent browser page: deep into the 10^6 rows, from the click ("Go" to a random agent in the
  second half: a fresh keyset query; or "Next page" 0.3 s later: the page fetched it ahead) to
  the commit of the new rows, measured in the page; the request's own time from Resource
  Timing; the same without a round running, for comparison.

Prints one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import time
from datetime import datetime
from pathlib import Path

import httpx

from bench.cluster import LocalCluster, wait_until
from bench.deploy import CONFIG, scratch_database
from bench.openai_server import OpenAIServer

CHROMIUM = Path("/usr/bin/chromium")
# As in tests/ui/conftest.py: Debian's Chromium, never a downloaded browser.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
TOKEN_KEY = "populace.apiToken"
LLM_MODEL = "bench-model"
# How long a reader looks at a page before "Next page" (the page fetches the next one ahead).
READING_MS = 300

# Installed before any script of the page: the token (so no login), paint marks, and socket
# receipt times. Everything is read back with page.evaluate.
INSTRUMENT = """
(() => {
  sessionStorage.setItem(%(key)s, %(token)s);
  localStorage.setItem(%(key)s, %(token)s);
  const marks = (window.__bench = { paint: null, recv: [], rows: [] });
  const painted = (name) => requestAnimationFrame(() => requestAnimationFrame(() => {
    marks[name] = performance.now();
  }));
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (e) => {
        const at = performance.now();
        if (typeof e.data === "string" && e.data.includes('"round.completed"')) {
          const m = JSON.parse(e.data);
          marks.recv.push({ round: m.payload.round, at, ts: m.ts });
        }
      });
    }
  };
  new MutationObserver((records) => {
    const at = performance.now();
    if (marks.commit === undefined && document.querySelector("tr[data-worker-id]")) {
      marks.commit = at;
      painted("paint");
    }
    for (const r of records) for (const node of r.addedNodes) {
      if (node.nodeType === 1 && node.matches("tr[data-round]")) {
        marks.rows.push({ round: Number(node.dataset.round), at });
      }
    }
  }).observe(document, { childList: true, subtree: true });
})();
"""

# One click in the agent browser, timed in the page until the table's rows change; also the
# request's own time from the Resource Timing entry (the rest is the page's work).
TIME_CLICK = """
async (name) => {
  const table = document.querySelector('table[aria-label="Agents"]');
  const first = () => table.querySelector("tbody tr td")?.textContent ?? "";
  const before = first();
  const requests = () => performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/agents?"));
  const seen = requests().length;
  const button = [...document.querySelectorAll("button")].find((b) => b.textContent.trim() === name);
  const total = await new Promise((resolve, reject) => {
    const started = performance.now();
    const observer = new MutationObserver(() => {
      if (first() !== before) {
        observer.disconnect();
        resolve(performance.now() - started);
      }
    });
    observer.observe(table, { childList: true, subtree: true, characterData: true });
    setTimeout(() => { observer.disconnect(); reject(new Error("no new page within 10 s")); }, 10000);
    button.click();
  });
  const entry = requests()[seen];
  return { total, request: entry ? entry.responseEnd - entry.startTime : null };
}
"""


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def _epoch_ms(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp() * 1000


def _context(browser, token: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(INSTRUMENT % {"key": json.dumps(TOKEN_KEY), "token": json.dumps(token)})
    return context


def _first_paints(context, url: str, loads: int) -> list[float]:
    paints = []
    for _ in range(loads):
        page = context.new_page()
        page.goto(f"{url}/cluster")
        page.wait_for_function("window.__bench.paint !== null", timeout=30_000)
        paints.append(page.evaluate("window.__bench.paint"))
        page.close()
    return paints


def _event_to_dom(page, url: str, simulation_id: int, events: int) -> tuple[list, list]:
    """(socket message -> row commit ms, manager publish -> row commit ms) per round."""
    page.goto(f"{url}/simulations/{simulation_id}")
    page.wait_for_function(
        f"window.__bench.recv.length >= {events}", timeout=events * 120_000, polling=500
    )
    marks = page.evaluate("window.__bench")
    origin = page.evaluate("performance.timeOrigin")
    rows = {r["round"]: r["at"] for r in marks["rows"]}
    in_page, wall = [], []
    for received in marks["recv"]:
        committed = rows.get(received["round"])
        if committed is None:
            raise RuntimeError(f"round {received['round']} arrived but never showed")
        in_page.append(committed - received["at"])
        wall.append(origin + committed - _epoch_ms(received["ts"]))
    return in_page, wall


def _agent_pages(page, url: str, population_id: int, size: int, samples: int) -> dict:
    """Jumps to random agents in the second half of the rows (a fresh keyset query each), each
    followed, READING_MS later, by a Next page."""
    page.goto(f"{url}/populations/{population_id}")
    page.get_by_role("status", name="Agents shown").filter(has_text="Agents").wait_for()
    page.evaluate("performance.setResourceTimingBufferSize(100000)")
    jumps, nexts, requests = [], [], []
    jump = page.get_by_label("Go to agent number")
    for _ in range(samples):
        jump.fill(str(random.randrange(size // 2, size - 100)))
        timed = page.evaluate(TIME_CLICK, "Go")
        jumps.append(timed["total"])
        requests.append(timed["request"])
        page.wait_for_timeout(READING_MS)
        nexts.append(page.evaluate(TIME_CLICK, "Next page")["total"])
    return {
        "p95_ms": round(_p95(jumps + nexts), 1),
        "jump_p95_ms": round(_p95(jumps), 1),
        "next_p95_ms": round(_p95(nexts), 1),
        "request_p95_ms": round(_p95([r for r in requests if r is not None]), 1),
    }


def _decisions_api_ms(cluster: LocalCluster, population_id: int, size: int, n: int) -> float:
    """GET /api/agents/{id}/decisions for random agents (what the agent page loads)."""
    timings = []
    with httpx.Client(base_url=cluster.url, headers=cluster.headers, timeout=30) as client:
        for _ in range(n):
            agent = (population_id << 32) + random.randrange(size)
            started = time.perf_counter()
            client.get(f"/api/agents/{agent}/decisions", params={"limit": 20}).raise_for_status()
            timings.append((time.perf_counter() - started) * 1000)
    return _p95(timings)


def _llm_policy(base_url: str) -> dict:
    """An LLM run at temperature 0 against the benchmark's OpenAI-compatible server: agents
    with identical prompts share a request, so 10^6 agents make a few requests a round, and
    the simulation page shows its LLM meters (live during the round, priced)."""
    return {
        "kind": "llm",
        "endpoints": [
            {
                "base_url": base_url,
                "model": LLM_MODEL,
                "max_concurrency": 8,
                "price": {"prompt_per_million": 0.1, "completion_per_million": 0.4},
            }
        ],
        "api": "completions",
        "temperature": 0,
    }


def _start_simulation(
    cluster: LocalCluster, population_id: int, latency_s: float, llm_url: str | None = None
) -> int:
    """A simulation long enough to outlast the benchmark, once it is running: synthetic, or
    an LLM run when the benchmark's LLM server is given."""
    policy = (
        {"kind": "synthetic", "latency_s": latency_s} if llm_url is None else _llm_policy(llm_url)
    )
    resp = httpx.post(
        f"{cluster.url}/api/simulations",
        json={
            "population_id": population_id,
            "name": "dashboard benchmark",
            "rounds": 1000,
            "policy": policy,
            "prompt": {"system": "roleplay", "user": "basic"},
            "segment_by": ["education"],
            "seed": 7,
        },
        headers=cluster.headers,
        timeout=60,
    )
    resp.raise_for_status()
    simulation_id = resp.json()["id"]
    wait_until(
        lambda: cluster.api(f"/api/simulations/{simulation_id}")["status"] == "running",
        60,
        "the simulation running",
    )
    return simulation_id


def _deploy(cluster: LocalCluster, agents: int) -> int:
    """POST the population and wait until it is deployed; its id."""
    resp = httpx.post(
        f"{cluster.url}/api/populations",
        content=CONFIG.format(size=agents),
        headers={**cluster.headers, "Content-Type": "application/yaml"},
        timeout=60,
    )
    resp.raise_for_status()
    population_id = resp.json()["id"]
    wait_until(
        lambda: cluster.api(f"/api/populations/{population_id}")["status"] == "deployed",
        600,
        "deployed",
    )
    return population_id


def _cancel(cluster: LocalCluster, simulation_id: int) -> None:
    httpx.post(
        f"{cluster.url}/api/simulations/{simulation_id}/cancel",
        headers=cluster.headers,
        timeout=120,
    )


def _paint_and_event_ms(paints: list[float], in_page: list[float], wall: list[float]) -> dict:
    """First paints, and each round event's ms from its socket message (in_page) and from the
    manager's publish (wall) to its row in the DOM."""
    return {
        "first_paint_ms_cold": round(paints[0], 1),
        "first_paint_ms_p50": round(statistics.median(paints), 1),
        "first_paint_ms_max": round(max(paints), 1),
        "event_to_dom_ms_p50": round(statistics.median(in_page), 1),
        "event_to_dom_ms_max": round(max(in_page), 1),
        "publish_to_dom_ms_p50": round(statistics.median(wall), 1),
        "publish_to_dom_ms_max": round(max(wall), 1),
        "round_events": len(in_page),
    }


def run(
    agents: int,
    procs: int,
    admin_url: str,
    latency_s: float,
    loads: int,
    events: int,
    samples: int,
    llm: bool = False,
) -> dict:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.is_file():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with (
        scratch_database(admin_url) as database_url,
        LocalCluster(POPULACE_DATABASE_URL=database_url) as cluster,
        (
            OpenAIServer(model=LLM_MODEL, latency_s=latency_s) if llm else contextlib.nullcontext()
        ) as llm_server,
    ):
        cluster.start_node(procs=procs)
        cluster.wait_online(procs)
        population_id = _deploy(cluster, agents)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = _context(browser, cluster.api_token).new_page()
            # For comparison: the agent browser while no round runs.
            idle = _agent_pages(page, cluster.url, population_id, agents, samples)
            simulation_id = _start_simulation(
                cluster, population_id, latency_s, llm_server.base_url if llm else None
            )
            try:
                # A context of its own: the first load is cold (no HTTP or code cache).
                paints = _first_paints(_context(browser, cluster.api_token), cluster.url, loads)
                in_page, wall = _event_to_dom(page, cluster.url, simulation_id, events)
                busy = _agent_pages(page, cluster.url, population_id, agents, samples)
                decisions_p95 = _decisions_api_ms(cluster, population_id, agents, 40)
                rounds_played = cluster.api(f"/api/simulations/{simulation_id}")["current_round"]
            finally:
                _cancel(cluster, simulation_id)
            browser.close()
    return {
        "benchmark": "dashboard",
        "agents": agents,
        "procs": procs,
        "database": "postgresql",
        "round_latency_s": latency_s,
        "policy": "llm (meters on)" if llm else "synthetic",
        "rounds_played": rounds_played,
        **_paint_and_event_ms(paints, in_page, wall),
        "agent_page_p95_ms": busy["p95_ms"],
        "agent_page_jump_p95_ms": busy["jump_p95_ms"],
        "agent_page_next_p95_ms": busy["next_p95_ms"],
        "agent_page_request_p95_ms": busy["request_p95_ms"],
        "agent_page_p95_ms_no_round": idle["p95_ms"],
        "agent_page_request_p95_ms_no_round": idle["request_p95_ms"],
        "agent_decisions_api_p95_ms": round(decisions_p95, 1),
        "targets_ms": {"first_paint": 1000, "event_to_dom": 250, "agent_page_p95": 50},
    }
