"""Calls to the tests' in-process OpenAI-compatible server (bench.openai_server)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

MODEL = "test-model"


def post(server, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        server.base_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
