"""bench.openai_server as a process (how benchmarks run it): it prints its URL when ready, speaks
the OpenAI shapes, is reconfigured over /admin while running, holds a thousand concurrent
keep-alive connections, and exits cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest

from tests.support import ROOT, stop_process


@pytest.fixture
def process_server():
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.openai_server", "--port", "0", "--model", "m"]
        + ["--also-serve", "n", "--latency-s", "0.5"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
        yield proc, url
    finally:
        stop_process(proc)


def test_speaks_openai_and_is_reconfigured_while_running(process_server):
    proc, url = process_server
    with httpx.Client(base_url=url, timeout=10) as http:
        models = http.get("/v1/models").json()
        assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["m", "n"]

        chat = http.post(
            "/v1/chat/completions",
            json={"model": "n", "seed": 3, "messages": [{"role": "user", "content": "pick one"}]},
        ).json()
        assert chat["object"] == "chat.completion"
        assert chat["choices"][0]["message"]["role"] == "assistant"
        assert chat["choices"][0]["message"]["content"].isdigit()
        assert chat["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}

        assert http.post("/admin/behaviour", json={"latency_s": 0, "fail_rate": 1}).json()["ok"]
        failed = http.post("/v1/completions", json={"model": "m", "prompt": "x"})
        assert failed.status_code == 500 and "injected" in failed.json()["error"]["message"]

        http.post("/admin/behaviour", json={"answer_text": "fixed words here"})
        done = http.post("/v1/completions", json={"model": "m", "prompt": "a b", "seed": 1})
        assert done.json()["choices"][0]["text"] == "fixed words here"
        assert done.json()["usage"]["completion_tokens"] == 3
        unknown = http.post("/v1/completions", json={"model": "zz", "prompt": "x"})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"

        bad = http.post("/admin/behaviour", json={"fail_rate": 0.8, "hang_rate": 0.5})
        assert bad.status_code == 400 and "sum to at most 1" in bad.text
        stats = http.get("/admin/stats").json()
        assert stats["requests"] == 4 and stats["by_status"] == {"200": 2, "500": 1, "404": 1}
        assert http.post("/admin/reset").json()["requests"] == 0
    assert stop_process(proc) == 0


async def test_a_thousand_concurrent_keep_alive_connections(process_server):
    _, url = process_server
    host, port = url.removeprefix("http://").split(":")
    n = 1000
    connections = await asyncio.gather(
        *(asyncio.open_connection(host, int(port)) for _ in range(n))
    )

    async def ask(i: int, reader, writer) -> dict:
        body = json.dumps({"model": "m", "prompt": f"agent {i}", "seed": i}).encode()
        writer.write(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        assert head.startswith(b"HTTP/1.1 200")
        return json.loads(await reader.readexactly(length))

    try:
        for _ in range(2):  # the second wave reuses every connection
            answers = await asyncio.gather(*(ask(i, r, w) for i, (r, w) in enumerate(connections)))
            assert [a["id"] for a in answers] == [f"cmpl-{i}" for i in range(n)]
    finally:
        for _, writer in connections:
            writer.close()
    async with httpx.AsyncClient(base_url=url) as http:
        stats = (await http.get("/admin/stats")).json()
    assert stats["requests"] == 2 * n and stats["by_status"] == {"200": 2 * n}
    assert stats["connections_opened"] == n + 1
