"""`populace llm serve-local`: the real llama.cpp server with Gemma 3 270M on CPU.

The command runs as a subprocess, assembles the model into a fresh data dir, and serves the
OpenAI API; the tests speak real HTTP to it. They time nothing: how fast Gemma answers, alone
and with requests in flight, is `populace bench llm --server gemma-local`'s (BENCHMARKS.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from backend.llm_local import MODEL_ALIAS
from tests.support import consecutive_free_ports, descendants, pid_alive, populace_cmd, wait_for

pytestmark = pytest.mark.timeout(600)

# A base model: the grammar is what makes the answer a number.
INTEGER_0_100 = 'root ::= [0-9] | [1-9][0-9] | "100"'
PROMPT = (
    "You are a game theory professor. Everyone picks a number from 0 to 100; whoever is "
    "closest to two thirds of the average wins.\nMy number:"
)


class Served:
    def __init__(self, proc: subprocess.Popen, url: str, children: list[int], data_dir: Path):
        self.proc, self.url, self.children, self.data_dir = proc, url, children, data_dir

    def complete(self, **overrides) -> dict:
        body = {
            "model": MODEL_ALIAS,
            "prompt": PROMPT,
            "max_tokens": 4,
            "temperature": 0.7,
            "seed": 11,
            "grammar": INTEGER_0_100,
            **overrides,
        }
        resp = httpx.post(f"{self.url}/v1/completions", json=body, timeout=120)
        assert resp.status_code == 200, resp.text
        return resp.json()


# llama_cpp.server reads each of its settings from an environment variable of the same name;
# serve-local must not let stray ones through (here: auth, another port, a tiny context).
STRAY_ENV = {"API_KEY": "stray-secret", "PORT": "1", "HOST": "192.0.2.1", "n_ctx": "16"}


def start_server(data_dir: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    # Replica i listens on port + i: every one of those ports must be free, not just the first.
    replicas = int(extra[extra.index("--replicas") + 1]) if "--replicas" in extra else 1
    port = consecutive_free_ports(replicas)
    proc = subprocess.Popen(
        populace_cmd(
            "llm", "serve-local", "--port", str(port), "--data-dir", str(data_dir), *extra
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **STRAY_ENV},
    )
    return proc, f"http://127.0.0.1:{port}"


def wait_ready(proc: subprocess.Popen, url: str) -> None:
    def ready():
        assert proc.poll() is None, f"serve-local exited with {proc.returncode}"
        return httpx.get(f"{url}/v1/models", timeout=5).status_code == 200

    wait_for(ready, timeout=300, every=0.5, what=f"{url}/v1/models")


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    data_dir = tmp_path_factory.mktemp("llm-data")
    proc, url = start_server(data_dir)
    try:
        wait_ready(proc, url)
        children = wait_for(lambda: descendants(proc.pid), what="the llama.cpp server process")
        yield Served(proc, url, children, data_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def _number(text: str) -> int:
    stripped = text.strip()
    assert re.fullmatch(r"[0-9]{1,3}", stripped), f"not an integer: {text!r}"
    value = int(stripped)
    assert 0 <= value <= 100, value
    return value


def test_the_model_is_assembled_into_the_data_dir(served: Served) -> None:
    models = list((served.data_dir / "models").iterdir())
    assert [m.name for m in models] == ["gemma-3-270m-q4_k_m.gguf"]
    assert models[0].stat().st_size > 100_000_000


def test_models_lists_the_alias(served: Served) -> None:
    body = httpx.get(f"{served.url}/v1/models", timeout=30).json()
    assert [m["id"] for m in body["data"]] == [MODEL_ALIAS]


def test_grammar_constrains_a_completion_to_an_integer(served: Served) -> None:
    body = served.complete()
    choice = body["choices"][0]
    _number(choice["text"])
    usage = body["usage"]
    assert usage["prompt_tokens"] > 10
    assert 1 <= usage["completion_tokens"] <= 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_many_seeds_give_numbers_in_range(served: Served) -> None:
    values = [_number(served.complete(seed=s)["choices"][0]["text"]) for s in range(8)]
    print(f"\nanswers for seeds 0..7: {values}")
    assert len(values) == 8


def test_chat_completions_accept_a_grammar_too(served: Served) -> None:
    body = {
        "model": MODEL_ALIAS,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 4,
        "seed": 3,
        "grammar": INTEGER_0_100,
    }
    resp = httpx.post(f"{served.url}/v1/chat/completions", json=body, timeout=120)
    assert resp.status_code == 200, resp.text
    _number(resp.json()["choices"][0]["message"]["content"])


def test_seeded_answers_repeat_whatever_came_before(served: Served) -> None:
    # The server keeps the previous prompt's KV cache, so request history changes the numerics
    # slightly: long free text at temperature > 0 may drift after a few tokens, but a short
    # seeded answer repeats, and greedy decoding repeats.
    def answer(seed: int | None, temperature: float, persona: str) -> str:
        prompt = PROMPT.replace("a game theory professor", persona)
        reply = served.complete(seed=seed, temperature=temperature, prompt=prompt)
        return reply["choices"][0]["text"]

    personas = ["a farmer", "a student", "a nurse", "a lawyer"]
    first = [answer(100 + i, 0.9, p) for i, p in enumerate(personas)]
    again = [answer(100 + i, 0.9, p) for i, p in reversed(list(enumerate(personas)))][::-1]
    assert again == first
    greedy = [answer(None, 0.0, p) for p in personas]
    assert [answer(None, 0.0, p) for p in reversed(personas)][::-1] == greedy
    # Different seeds are what makes identical prompts answer differently.
    assert len({answer(s, 0.9, "a farmer") for s in range(8)}) > 1


def test_parallel_requests_are_queued_and_all_answered(served: Served) -> None:
    # The server runs one completion at a time and queues the others: each request in flight
    # together with others is still answered whole, as it would be alone (a short seeded
    # answer repeats whatever came before, see above), not cut, dropped or mixed with another.
    seeds = range(8)

    def answer(seed: int) -> str:
        return served.complete(seed=seed)["choices"][0]["text"]

    # The same history for every request: each one follows one with this very prompt, so its
    # prompt comes from the cache the same way (the first after another prompt would not).
    answer(0)
    alone = [answer(seed) for seed in seeds]
    for text in alone:
        _number(text)
    for parallel in (2, 4):
        with ThreadPoolExecutor(parallel) as pool:
            together = list(pool.map(answer, seeds))
        assert together == alone, parallel


def test_sigterm_stops_the_server_and_leaves_nothing(served: Served) -> None:
    assert served.children and all(pid_alive(pid) for pid in served.children)
    served.proc.send_signal(signal.SIGTERM)
    output, _ = served.proc.communicate(timeout=60)
    assert served.proc.returncode == 0, output
    assert "serving model 'gemma-3-270m'" in output
    assert not [pid for pid in served.children if pid_alive(pid)], "llama.cpp server left behind"


def test_replicas_reuse_the_model_and_stop_together(served: Served) -> None:
    model = served.data_dir / "models" / "gemma-3-270m-q4_k_m.gguf"
    mtime = model.stat().st_mtime_ns
    proc, url = start_server(served.data_dir, "--model-name", "tiny", "--replicas", "2")
    second = url.rsplit(":", 1)[0] + f":{int(url.rsplit(':', 1)[1]) + 1}"
    try:
        wait_ready(proc, url)
        wait_ready(proc, second)
        for base in (url, second):
            body = httpx.get(f"{base}/v1/models", timeout=30).json()
            assert [m["id"] for m in body["data"]] == ["tiny"]
        children = wait_for(lambda: len(descendants(proc.pid)) == 2 and descendants(proc.pid))
        # One server dying (here: SIGKILL) ends the command with an error, and the other too.
        os.kill(children[0], signal.SIGKILL)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 1, output
    assert "exited with code -9" in output
    assert not [pid for pid in children if pid_alive(pid)], "a replica was left behind"
    assert model.stat().st_mtime_ns == mtime, "the model was assembled again"


def test_logprobs_come_back_only_from_a_server_asked_for_them(served: Served) -> None:
    # Servers of their own: the module's server is stopped by the SIGTERM test.
    body = {"model": MODEL_ALIAS, "prompt": "The number is", "max_tokens": 1, "logprobs": 5}
    plain_proc, plain_url = start_server(served.data_dir)
    proc, url = start_server(served.data_dir, "--logprobs")
    try:
        wait_ready(plain_proc, plain_url)
        wait_ready(proc, url)
        plain = httpx.post(f"{plain_url}/v1/completions", json=body, timeout=120)
        reply = httpx.post(f"{url}/v1/completions", json=body, timeout=120).json()
    finally:
        for started in (plain_proc, proc):
            started.terminate()
        for started in (plain_proc, proc):
            started.wait(60)
    # llama-cpp-python refuses logprobs without logits_all (or, in other versions, omits them).
    if plain.status_code == 200:
        assert not (plain.json()["choices"][0].get("logprobs") or {}).get("top_logprobs")
    else:
        assert plain.status_code in (400, 500), plain.text
    (top,) = reply["choices"][0]["logprobs"]["top_logprobs"]
    assert len(top) >= 5 and all(lp <= 0 for lp in top.values())  # the top 5 and the sampled


def test_without_the_extra_it_says_what_to_install(tmp_path: Path) -> None:
    # Blocking the import is how a missing package looks to Python.
    code = (
        "import sys; sys.modules['llama_cpp'] = None\n"
        "from backend.cli import main\n"
        "sys.argv = ['populace', 'llm', 'serve-local', '--data-dir', sys.argv[1]]\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert "pip install 'populace[llm-local]'" in result.stderr
    assert "llama_cpp" in result.stderr
    assert not (tmp_path / "models").exists()


def test_a_missing_model_path_is_a_clear_error(tmp_path: Path) -> None:
    proc, _ = start_server(tmp_path, "--model-path", str(tmp_path / "nope.gguf"))
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "nope.gguf" in output and "not a file" in output


def test_bench_llm_runs_both_servers_end_to_end() -> None:
    """`populace bench llm` at toy sizes: real workers, the real Gemma server, one JSON line each."""
    result = subprocess.run(
        populace_cmd(
            "bench", "llm", "--agents", "60", "--concurrency", "8", "--latency", "0.05",
            "--gemma-agents", "4",
        ),
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [line["server"] for line in lines] == ["fixed-latency", "gemma-local"]
    for line, agents in zip(lines, (60, 4), strict=True):
        assert line["agents"] == agents
        assert line["direct_answered"] == line["platform_answered"] == agents, line
        assert line["platform_llm_errors"] == 0 and line["platform_late"] == 0, line
        assert line["platform_per_s"] > 0 and line["direct_per_s"] > 0
        print(f"\n{json.dumps(line)}")
    # The fixed-latency server answers numbers only; Gemma answers under the workers' grammar.
    assert lines[0]["platform_valid"] == 60
    assert lines[1]["platform_valid"] == lines[1]["direct_valid"] == 4
