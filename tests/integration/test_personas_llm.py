"""LLM personas written by real worker processes against a real OpenAI-compatible HTTP server
of the test's own.

The server answers `/v1/completions` over real sockets, counts requests in flight, and can be
told to fail (500), hang (until the test releases them), or answer empty text for chosen agents (picked by the request seed).
The manager splits the population between the workers (GeneratePersonas); every request leaves
from a worker.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from backend.populations.config import PopulationConfig
from backend.populations.personas import PersonaShare, generate_llm_personas, render_template
from backend.populations.sampling import attribute_dict, sample
from tests.support import stop_process, trust_test_workers, wait_for

SEED = 7
METAPROMPT = "Write a persona for a {occupation} aged {age_value} with {education} education."
TEMPLATE = "You are a {occupation} aged {age_value}."


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default listen backlog of 5 resets connections when many clients connect at once.
    request_queue_size = 1024


@dataclass
class Behaviour:
    delay_s: float = 0.0
    fail: set[int] = field(default_factory=set)  # agent indices answered with 500
    hang: set[int] = field(default_factory=set)  # agent indices answered only after `release`
    empty: set[int] = field(default_factory=set)  # agent indices answered with ""
    release: threading.Event = field(default_factory=threading.Event)


class CompletionServer:
    def __init__(self):
        self.behaviour = Behaviour()
        self.bodies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.hung: set[int] = set()  # agents whose request reached a hang
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.bodies.append(body)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(body)
                except OSError:
                    pass  # the client gave up (timeout) and closed the connection
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, body):
                behaviour = server.behaviour
                agent = body["seed"] - SEED
                time.sleep(behaviour.delay_s)
                if self.path != "/v1/completions":
                    return self._send(404, {"error": "not found"})
                if agent in behaviour.fail:
                    return self._send(500, {"error": "model crashed"})
                if agent in behaviour.hang:
                    with server.lock:
                        server.hung.add(agent)
                    behaviour.release.wait()
                text = "" if agent in behaviour.empty else f" PERSONA[{body['prompt']}] "
                self._send(
                    200,
                    {
                        "id": f"cmpl-{agent}",
                        "object": "text_completion",
                        "model": body["model"],
                        "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    },
                )

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.behaviour.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def workers(shared_manager):
    node = shared_manager.start_workers(procs=2)
    try:
        online = wait_for(
            lambda: (
                (ws := [w for w in shared_manager.workers() if w["state"] == "online"])
                and len(ws) == 2
                and ws
            ),
            timeout=30,
            what="two workers online",
        )
        trust_test_workers([w["address"] for w in online])
        yield [w["address"] for w in online]
    finally:
        stop_process(node)  # the module's manager does not own the nodes started on it


def shares(workers: list[str], size: int) -> list[PersonaShare]:
    """The first worker writes the first third, the second the rest."""
    cut = size // 3
    return [PersonaShare(workers[0], 0, cut), PersonaShare(workers[1], cut, size - cut)]


@pytest.fixture
def server():
    with CompletionServer() as running:
        yield running


def make_config(endpoint: str, size: int, **persona) -> PopulationConfig:
    return PopulationConfig.model_validate(
        {
            "name": "llm-personas",
            "size": size,
            "seed": SEED,
            "distributions": [
                {
                    "name": "education",
                    "categories": [
                        {"name": "primary", "weight": 0.5},
                        {"name": "doctorate", "weight": 0.5},
                    ],
                },
                {
                    "name": "occupation",
                    "given": "education",
                    "conditional": {
                        "primary": [{"name": "farmer", "weight": 1}],
                        "doctorate": [
                            {"name": "professor", "weight": 0.5},
                            {"name": "chemist", "weight": 0.5},
                        ],
                    },
                },
                {
                    "name": "age",
                    "bins": [
                        {"name": "young", "min": 18, "max": 39, "weight": 0.5},
                        {"name": "old", "min": 40, "max": 90, "weight": 0.5},
                    ],
                },
            ],
            "persona": {
                "mode": "llm",
                "template": TEMPLATE,
                "metaprompt": METAPROMPT,
                "endpoint": f"{endpoint}/v1",
                "model": "tiny-test-model",
                "max_tokens": 64,
                **persona,
            },
        }
    )


async def test_prompts_carry_each_agents_attributes(server, workers):
    config = make_config(server.url, 60)
    population = sample(config)
    personas, failures = await generate_llm_personas(
        config.persona, population, shares(workers, 60)
    )
    assert failures == 0
    bodies = {body["seed"] - SEED: body for body in server.bodies}
    assert sorted(bodies) == list(range(60)), "one request per agent, seeded by its index"
    for i in range(60):
        prompt = METAPROMPT.format(**attribute_dict(population, i))
        body = bodies[i]
        assert body["model"] == "tiny-test-model"
        assert body["prompt"] == prompt
        assert body["max_tokens"] == 64
        assert body["temperature"] == 0.7
        assert personas[i] == f"PERSONA[{prompt}]"


async def test_concurrency_never_exceeds_the_cap(server, workers):
    server.behaviour.delay_s = 0.02
    config = make_config(server.url, 120, max_concurrency=6)
    progress = []
    personas, failures = await generate_llm_personas(
        config.persona,
        sample(config),
        shares(workers, 120),
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert failures == 0 and len(personas) == 120 and len(server.bodies) == 120
    # The cap is split between the workers by their shares (a third and two thirds).
    assert 2 <= server.max_in_flight <= 6
    assert progress[-1] == (120, 120)


async def test_failures_fall_back_to_the_template_and_are_counted(server, workers):
    server.behaviour.fail = {0, 7, 14, 21}
    server.behaviour.hang = {3, 25}
    server.behaviour.empty = {5}
    config = make_config(server.url, 30, max_concurrency=8, timeout_s=0.3)
    population = sample(config)
    # The hung requests are answered only after the call: it returns at all because they were
    # abandoned at timeout_s, not waited out (the timeout is a hang guard, not a speed bound).
    async with asyncio.timeout(60):
        personas, failures = await generate_llm_personas(
            config.persona, population, shares(workers, 30)
        )
    assert server.hung == {3, 25}, "the hanging requests reached the server and hung"
    server.behaviour.release.set()
    failed = {0, 7, 14, 21, 3, 25, 5}
    assert failures == len(failed)
    fallback = render_template(TEMPLATE, population, np.arange(30))
    for i in range(30):
        if i in failed:
            assert personas[i] == fallback[i] == TEMPLATE.format(**attribute_dict(population, i))
        else:
            prompt = METAPROMPT.format(**attribute_dict(population, i))
            assert personas[i] == f"PERSONA[{prompt}]"


async def test_unreachable_endpoint_falls_back_for_everyone(workers):
    with CompletionServer() as gone:
        url = gone.url
    config = make_config(url, 10, timeout_s=2)
    population = sample(config)
    personas, failures = await generate_llm_personas(
        config.persona, population, shares(workers, 10)
    )
    assert failures == 10
    assert personas == render_template(TEMPLATE, population, np.arange(10))


def test_a_deploy_with_llm_personas_stores_what_the_workers_wrote(server, workers, shared_manager):
    server.behaviour.fail = {4}
    config = make_config(server.url, 40)
    with shared_manager.api() as api:
        resp = api.post("/api/populations", json=config.model_dump(mode="json"))
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed",
            60,
            what="deployed",
        )
        agents = api.get("/api/agents", params={"population_id": pid, "limit": 100}).json()
        personas = [a["persona"] for a in agents["items"]]
        assert len(personas) == 40
        assert personas[4] == TEMPLATE.format(**agents["items"][4]["attributes"]), "fallback"
        written = [p for i, p in enumerate(personas) if i != 4]
        assert all(p.startswith("PERSONA[Write a persona for a ") for p in written), written[:3]
        assert len({body["seed"] for body in server.bodies}) == 40
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            30,
            what="deleted",
        )
