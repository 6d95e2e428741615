"""Interviewing an agent in the browser with a real LLM: Gemma 3 270M on CPU through llama.cpp's
server (`populace llm serve-local`) plays a short run, then one of its agents is asked why it
chose its number; the answer streams into the page piece by piece and is listed with the run."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from backend.llm_local import MODEL_ALIAS, start_local_llm
from tests.support import free_port, wait_for
from tests.support_populations import deploy_population, population_yaml
from tests.support_simulations import finish
from tests.ui.support import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
QUESTION = "Why did you choose your number?"

# Every text the answer shows, recorded in the page as it changes (a poll could miss steps).
RECORD_ANSWER_TEXTS = """() => {
  window.__answers = [];
  const section = document.querySelector('[data-testid="agent-interviews"]');
  new MutationObserver(() => {
    const answer = section.querySelector('[data-testid="interview-answer"]');
    const text = answer ? answer.textContent : null;
    if (text && window.__answers[window.__answers.length - 1] !== text) window.__answers.push(text);
  }).observe(section, { subtree: true, childList: true, characterData: true });
}"""


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    with start_local_llm(free_port(), data_dir=tmp_path_factory.mktemp("llm-data")) as llm:
        yield llm


def _played_run(manager, gemma) -> tuple[int, int]:
    """A finished one-round Gemma run on a small population: (population id, simulation id)."""
    manager.start_workers(procs=1)
    wait_for(lambda: len(manager.workers(state="online")) == 1, 60, what="a worker online")
    with manager.api() as api:
        pid = deploy_population(api, population_yaml("education", name="asked", size=4))["id"]
        endpoint = {"base_url": gemma.base_url, "model": MODEL_ALIAS, "server": "llama_cpp"}
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": pid,
                "name": "gemma once",
                "rounds": 1,
                "rule": {"preset": "2/3"},
                "prompt": {"system": "roleplay", "user": "basic"},
                "policy": {"kind": "llm", "endpoints": [endpoint], "api": "completions"},
                "deadlines": {"agent_s": 120},
                "seed": 9,
            },
        )
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        assert finish(api, sid, timeout=300)["status"] == "completed"
    return pid, sid


def test_an_agent_answers_in_the_page_as_the_llm_writes(
    page, manager, gemma, dashboard_built, screenshot
):
    pid, sid = _played_run(manager, gemma)
    with manager.api() as api:
        agent = api.get("/api/agents", params={"population_id": pid, "limit": 1}).json()["items"][0]

    sign_in(page, manager)
    page.goto(f"{manager.url}/agents/{agent['id']}")
    panel = page.get_by_test_id("agent-interviews")
    expect(panel.get_by_label("About simulation")).to_have_value(str(sid))
    expect(panel.get_by_text(f"No interview about simulation {sid} yet.")).to_be_visible()
    page.evaluate(RECORD_ANSWER_TEXTS)
    panel.get_by_label("Question").fill(QUESTION)
    panel.get_by_role("button", name="Ask").click()

    listed = panel.get_by_test_id("interview")
    expect(listed).to_have_count(1, timeout=240_000)
    expect(listed).to_have_attribute("data-status", "answered")
    expect(listed).to_contain_text(QUESTION)
    with manager.api() as api:
        (kept,) = api.get(f"/api/agents/{agent['id']}/interviews").json()["items"]
    assert kept["status"] == "answered" and kept["model"] == MODEL_ALIAS
    assert kept["prompt"].endswith(f"Interviewer: {QUESTION}\nYou:")
    assert agent["persona"] in kept["prompt"] and "Round 1: " in kept["prompt"]
    assert kept["answer"].strip() and kept["completion_tokens"] > 0
    expect(panel.get_by_test_id("interview-answer")).to_have_text(kept["answer"])

    # It streamed: the page showed the answer growing, each step a beginning of the next.
    texts = [t for t in page.evaluate("window.__answers") if t not in ("…", "(no answer)")]
    assert len(texts) > 1, texts
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False)), texts
    assert texts[-1] == kept["answer"]
    screenshot("interview-answered")

    # A viewer reads the interviews but is offered no question to ask.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API token").fill(manager.viewer_token)
    page.get_by_role("button", name="Sign in").click()
    # The role is known (GET /api/info said so) before we look for what is missing.
    expect(page.get_by_text("read-only", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name=f"Agent {agent['id']}")).to_be_visible()
    expect(panel.get_by_test_id("interview")).to_contain_text(QUESTION)
    expect(panel.get_by_label("About simulation")).to_have_value(str(sid))
    expect(panel.get_by_label("Question")).to_have_count(0)
    expect(panel.get_by_role("button", name="Ask")).to_have_count(0)
