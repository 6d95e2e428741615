"""A fake OpenAI-compatible completions server whose answers echo the prompt (or fail, hang or
come back empty per agent), and a population config whose personas it writes."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from backend.populations.config import PopulationConfig

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
