"""An interview's answer streams from a real OpenAI-compatible HTTP server (bench.openai_server,
checking requests as vLLM does): deltas as they come, the usage at the end, failures reported
in the last part; and the stand-in refuses what real servers refuse about streaming."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from bench.openai_server import OpenAIServer
from tests.support import free_port
from tests.support_interviews import agent_store, interview_request
from worker_server.interview import Delta, Finished, answer, prepare
from worker_server.llm.client import LlmClient
from worker_server.llm.streaming import StreamFailed, stream_events

TEXT = "Thirty felt safe, since most players aim low."


@pytest.fixture
def server():
    with OpenAIServer(model="small-m", answer=lambda r: TEXT, validate="vllm") as running:
        yield running


def _job(server, kind: str = "vllm", api: str = "completions"):
    request = interview_request()
    for endpoint in request.llm.endpoints:
        endpoint.base_url = server.base_url if server else f"http://127.0.0.1:{free_port()}"
        endpoint.server = kind
    request.llm.api = api
    return prepare(request, agent_store(), LlmClient())


async def _parts(job) -> tuple[list[str], Finished]:
    parts = [part async for part in answer(job)]
    *deltas, last = parts
    assert all(isinstance(d, Delta) for d in deltas) and isinstance(last, Finished)
    return [d.text for d in deltas], last


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_the_answer_arrives_in_pieces_with_the_usage(server, api):
    deltas, done = await _parts(_job(server, api=api))
    assert len(deltas) == len(TEXT.split()) and "".join(deltas) == TEXT
    assert done.error == "" and done.model == "small-m"
    assert done.completion_tokens == len(TEXT.split()) and done.prompt_tokens > 0
    (record,) = server.records
    assert record.body["stream"] is True and record.status == 200


async def test_without_usage_in_the_stream_tokens_are_counted_from_it(server):
    deltas, done = await _parts(_job(server, kind="llama_cpp"))
    assert "stream_options" not in server.records[0].body
    assert done.prompt_tokens == 0 and done.completion_tokens == len(deltas)


async def test_a_server_error_is_the_last_parts_error(server):
    server.behaviour.fault = lambda request: "500"
    deltas, done = await _parts(_job(server))
    assert deltas == [] and "HTTP 500" in done.error and "injected 500" in done.error
    assert done.prompt.endswith("You:")


async def test_an_unreachable_server_is_the_last_parts_error():
    deltas, done = await _parts(_job(None))
    assert deltas == [] and "cannot connect" in done.error


async def test_a_refused_request_is_not_the_endpoints_failure(server):
    with pytest.raises(StreamFailed) as failed:
        async for _ in stream_events(
            server.base_url, "/v1/completions", {"model": "small-m", "prompt": "x", "stream": 1}
        ):
            pass
    assert "HTTP 400" in str(failed.value) and not failed.value.broken


def _post(server, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        server.base_url + "/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"stream": "yes"}, "stream must be a boolean"),
        ({"stream_options": {"include_usage": True}}, "only be defined when `stream=True`"),
        ({"stream": True, "stream_options": {"include_usage": "y"}}, "include_usage"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "at most 4"),
        ({"stop": [1]}, "stop must be a string"),
    ],
)
def test_the_stand_in_refuses_what_real_servers_refuse(server, fields, says):
    status, text = _post(server, {"model": "small-m", "prompt": "x", **fields})
    assert status == 400 and says in text


def test_the_stream_is_server_sent_events_ending_in_done(server):
    status, text = _post(
        server,
        {"model": "small-m", "prompt": "x", "stream": True, "stop": " since"},
    )
    assert status == 200
    events = [line for line in text.split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == "Thirty felt safe,"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
