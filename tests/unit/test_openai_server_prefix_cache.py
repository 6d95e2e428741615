"""bench.openai_server in vLLM mode reports usage.prompt_tokens_details.cached_tokens as vLLM with
--enable-prompt-tokens-details does: the leading 16-token blocks of a prompt that an earlier
prompt shared; without validation it reports no details, like a server that does not cache."""

from __future__ import annotations

from bench.openai_server import OpenAIServer, PrefixCache
from tests.support_openai import MODEL, post

SHARED = " ".join(f"w{i}" for i in range(40))  # two full blocks and 8 words


def _usage(server, prompt: str, path: str = "/v1/completions") -> dict:
    body = (
        {"model": MODEL, "prompt": prompt}
        if path == "/v1/completions"
        else {"model": MODEL, "messages": [{"role": "user", "content": prompt}]}
    )
    status, reply = post(server, path, body)
    assert status == 200, reply
    return reply["usage"]


def test_a_shared_prefix_is_cached_in_whole_blocks():
    with OpenAIServer(model=MODEL, validate="vllm") as server:
        first = _usage(server, SHARED + " first")
        assert first["prompt_tokens"] == 41
        assert first["prompt_tokens_details"] == {"cached_tokens": 0}
        assert _usage(server, SHARED + " second")["prompt_tokens_details"]["cached_tokens"] == 32
        # The same prompt again: vLLM always computes the last token, so never all of it.
        again = " ".join(SHARED.split()[:32])
        assert _usage(server, again)["prompt_tokens_details"]["cached_tokens"] == 16
        chat = _usage(server, SHARED + " third", "/v1/chat/completions")
        assert chat["prompt_tokens_details"]["cached_tokens"] == 32
        other = _usage(server, "x " + SHARED)
        assert other["prompt_tokens_details"]["cached_tokens"] == 0, "a prefix, not a substring"


def test_without_vllm_validation_no_details_are_reported():
    with OpenAIServer(model=MODEL) as server:
        for _ in range(2):
            assert "prompt_tokens_details" not in _usage(server, SHARED)


def test_the_cache_is_per_model_and_bounded():
    cache = PrefixCache(max_blocks=2)
    assert cache.take("a", [SHARED]) == 0
    assert cache.take("b", [SHARED]) == 0
    assert cache.take("b", [SHARED]) == 32
    assert cache.take("a", [SHARED]) == 0, "model a's blocks were evicted"
    # A list of prompts: each one may use the blocks of those before it.
    assert PrefixCache().take("a", [SHARED, SHARED]) == 32
