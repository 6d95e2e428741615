"""bench.openai_server in vLLM mode stands in for the vLLM pinned in docker-compose.yml: the
worker's requests for a vllm endpoint pass its validation, a wrong field fails, the regex is
honoured, and prompt arrays, n and logprobs come back in vLLM's shapes and order."""

from __future__ import annotations

import re

import pytest

from bench.openai_server import OpenAIServer
from tests.support_openai import MODEL, post
from worker_server.llm import Generation, LlmClient, LlmFailure
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.spec import EndpointSpec


@pytest.fixture
def server():
    with OpenAIServer(model=MODEL, validate="vllm") as running:
        yield running


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_the_workers_vllm_request_passes_and_its_regex_is_honoured(server, api):
    constraint = NumberConstraint.for_range(20, 35)
    # The default answer (0..100) mostly falls outside [20, 35]: the server must honour the regex.
    server.behaviour.answer = lambda request: "99"
    client = LlmClient(backoff_base_s=0.01)
    route = client.routes([EndpointSpec(server.base_url, MODEL, 4, server="vllm")])[MODEL]
    try:
        for i in range(5):
            generation = Generation(
                api=api, model=MODEL, system="rules", user=f"agent {i}", seed=i,
                constraint=constraint,
            )  # fmt: skip
            completion = await client.complete(route, generation, timeout_s=10, max_retries=0)
            assert re.fullmatch(constraint.regex, completion.text), completion.text
            assert 20 <= float(completion.text) <= 35
    finally:
        await client.aclose()
    assert {r.status for r in server.records} == {200}
    body = server.bodies[-1]
    assert body["structured_outputs"] == {"regex": constraint.regex}
    assert "guided_regex" not in body


async def test_a_field_vllm_does_not_document_fails(server):
    client = LlmClient(backoff_base_s=0.01)
    route = client.routes([EndpointSpec(server.base_url, MODEL, 4, server="vllm")])[MODEL]
    wrong = Generation(api="completions", model=MODEL, user="go", extra={"guided_regex": "[0-9]"})
    try:
        with pytest.raises(LlmFailure, match="400"):
            await client.complete(route, wrong, timeout_s=10, max_retries=0)
    finally:
        await client.aclose()
    assert server.records[-1].status == 400


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"guided_regex": "[0-9]+"}, "guided_regex"),
        ({"n": 0}, "n"),
        ({"n": "2"}, "n"),
        ({"logprobs": 21}, "logprobs"),
        ({"logprobs": -1}, "logprobs"),
        ({"logprobs": True}, "logprobs"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"seed": 2**63}, "seed"),
        ({"prompt": ["a", 3]}, "prompt"),
        ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs"),
        ({"structured_outputs": {"regex": "[0-9]", "choice": ["1"]}}, "structured_outputs"),
        ({"structured_outputs": {"guided_regex": "[0-9]"}}, "structured_outputs"),
        ({"structured_outputs": {"regex": "[a-z]{3}"}}, "structured_outputs"),  # unsatisfiable
    ],
)
def test_what_vllm_rejects_is_answered_400_in_its_shape(server, fields, param):
    status, body = post(server, "/v1/completions", {"model": MODEL, "prompt": "go", **fields})
    assert status == 400, body
    assert body["error"]["type"] == "BadRequestError" and body["error"]["code"] == 400
    assert body["error"]["param"] == param


@pytest.mark.parametrize(
    "fields",
    [{"logprobs": 1}, {"top_logprobs": 2}, {"logprobs": True, "top_logprobs": 21}],
)
def test_chat_logprobs_are_a_bool_with_top_logprobs(server, fields):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], **fields}
    status, _ = post(server, "/v1/chat/completions", body)
    assert status == 400


def test_prompt_arrays_and_n_come_back_in_vllms_index_order(server):
    prompts = ["first", "second", "third"]
    regex = " ?(0|[1-9][0-9]?|100)"
    status, body = post(server, "/v1/completions", {
        "model": MODEL, "prompt": prompts, "n": 2, "seed": 5, "logprobs": 3, "max_tokens": 4,
        "temperature": 1.0, "structured_outputs": {"regex": regex},
    })  # fmt: skip
    assert status == 200, body
    choices = body["choices"]
    assert [c["index"] for c in choices] == list(range(6)), "prompt i, sample j: i * n + j"
    texts = [c["text"] for c in choices]
    assert all(re.fullmatch(regex, t) for t in texts)
    assert server.records[-1].texts == tuple(texts)
    # One prompt's samples differ from another's: choices follow their own prompt.
    alone = post(server, "/v1/completions", {"model": MODEL, "prompt": "second", "seed": 5})[1]
    assert alone["choices"][0]["text"] == texts[2]
    logprobs = choices[0]["logprobs"]
    assert logprobs["tokens"] == list(texts[0])
    assert len(logprobs["token_logprobs"]) == len(texts[0])
    assert all(len(top) == 3 and lp <= 0 for top in logprobs["top_logprobs"]
               for lp in top.values())  # fmt: skip
    assert body["usage"]["prompt_tokens"] == 3 and body["usage"]["completion_tokens"] == 6


def test_chat_n_and_top_logprobs(server):
    status, body = post(server, "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "go"}], "n": 3,
        "logprobs": True, "top_logprobs": 2,
        "structured_outputs": {"choice": ["low", "high"]},
    })  # fmt: skip
    assert status == 200, body
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    for choice in body["choices"]:
        assert choice["message"]["content"] in ("low", "high")
        content = choice["logprobs"]["content"]
        assert "".join(t["token"] for t in content) == choice["message"]["content"]
        assert all(len(t["top_logprobs"]) == 2 and t["top_logprobs"][0]["token"] == t["token"]
                   for t in content)  # fmt: skip


def test_without_validation_the_server_stays_lenient():
    with OpenAIServer(model=MODEL) as lenient:
        status, body = post(lenient, "/v1/completions",
                            {"model": MODEL, "prompt": "go", "guided_regex": "x"})  # fmt: skip
        assert status == 200 and body["choices"][0]["text"].isdigit()
    with pytest.raises(ValueError):
        OpenAIServer(validate="sglang")
