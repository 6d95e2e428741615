"""The interview prompt the worker writes: who the agent is, the rules, what it remembers of the
run, then the question as a transcript for a base model to continue; and the request checks."""

from __future__ import annotations

import pytest

from tests.support_interviews import AGENT, agent_store, interview_request
from worker_server.interview import (
    MAX_QUESTION_CHARS,
    AgentNotHosted,
    InvalidInterview,
    Memory,
    Rule,
    memory_line,
    prepare,
    ratio_text,
    request_body,
    rules_text,
)
from worker_server.llm.client import LlmClient


@pytest.mark.parametrize(
    ("memory", "line"),
    [
        (Memory(1, 40.0, "valid", 26.67, 30.0), "Round 1: I chose 40; the target was 26.67 and "
         "the winning number was 30."),
        (Memory(2, 30.0, "valid", 20.0, 30.0), "Round 2: I chose 30; the target was 20 and the "
         "winning number was 30, so I won."),
        (Memory(3, None, "invalid", 18.0, 20.0), "Round 3: I gave no valid number; the target "
         "was 18 and the winning number was 20."),
        (Memory(4, None, "late", None, 12.5), "Round 4: I did not answer in time; the winning "
         "number was 12.5."),
        (Memory(5, None, "lost"), "Round 5: I did not play."),
    ],
)  # fmt: skip
def test_memory_lines_say_what_the_agent_did_and_what_came_of_it(memory, line):
    assert memory_line(memory) == line


def test_rules_name_the_ratio_as_a_fraction_and_the_offset():
    assert ratio_text(2 / 3) == "2/3" and ratio_text(0.51) == "51/100" and ratio_text(0.5) == "1/2"
    assert ratio_text(0.123456) == "0.12"
    text = rules_text(Rule(0.5, 5.0, 0.0, 100.0))
    assert "between 0 and 100" in text
    assert "closest to 5 plus 1/2 of the average" in text
    assert "minus" in rules_text(Rule(2 / 3, -1.0, 0.0, 100.0))


def test_the_prompt_is_a_transcript_of_persona_rules_memory_and_question():
    job = prepare(interview_request(" Why 30? "), agent_store(), LlmClient())
    prompt = job.prompt
    assert prompt.endswith("\n\nInterviewer: Why 30?\nYou:")
    assert "# The player\nYou are a chess teacher.\n" in prompt
    assert "closest to 2/3 of the average" in prompt
    first = prompt.index("Round 1: I chose 50; the target was 30 and the winning number was 35.")
    second = prompt.index("Round 2: I gave no valid number;")
    assert first < second  # oldest first
    assert "Someone else" not in prompt
    assert job.model == "small-m" and job.max_tokens == 256


def test_an_agent_without_persona_is_described_by_its_attributes_and_without_memory():
    request = interview_request()
    del request.memory[:]
    job = prepare(request, agent_store(persona=""), LlmClient())
    assert "A player (size: big)." in job.prompt
    assert "The game has not started yet." in job.prompt


def test_the_model_mixture_picks_the_agents_model():
    request = interview_request(model_attribute="size", model_by_category={"big": "big-m"})
    assert prepare(request, agent_store(), LlmClient()).model == "big-m"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: setattr(r, "question", "  \n "), "question"),
        (lambda r: setattr(r, "question", "x" * (MAX_QUESTION_CHARS + 1)), "question"),
        (lambda r: setattr(r, "max_tokens", 257), "max_tokens"),
        (lambda r: setattr(r.llm, "temperature", 3.0), "llm.temperature"),
        (lambda r: setattr(r.llm, "default_model", "nobody-serves-it"), "model"),
        (lambda r: r.llm.endpoints[0].__setattr__("base_url", "ftp://x"), "llm.endpoints[0]"),
        (lambda r: r.memory[0].__setattr__("value", float("nan")), "memory[0]"),
    ],
)
def test_bad_requests_name_the_field(change, field):
    request = interview_request()
    change(request)
    with pytest.raises(InvalidInterview, match=field.replace("[", r"\[").replace("]", r"\]")):
        prepare(request, agent_store(), LlmClient())


def test_an_agent_not_hosted_here_is_not_found():
    request = interview_request()
    request.agent_id = AGENT + 5
    with pytest.raises(AgentNotHosted):
        prepare(request, agent_store(), LlmClient())
    request.population_id = "8"
    with pytest.raises(AgentNotHosted):
        prepare(request, agent_store(), LlmClient())


def test_the_streamed_request_asks_usage_only_of_servers_that_take_it():
    job = prepare(interview_request(), agent_store(), LlmClient())
    path, body = request_body(job, "llama_cpp")
    assert path == "/v1/completions" and body["prompt"] == job.prompt
    assert body["stream"] is True and body["stop"][0] == "\nInterviewer:"
    assert "stream_options" not in body
    _, body = request_body(job, "vllm")
    assert body["stream_options"] == {"include_usage": True}

    chat = prepare(interview_request(), agent_store(), LlmClient())
    chat = type(chat)(**{**vars(chat), "api": "chat"})
    path, body = request_body(chat, "openai")
    assert path == "/v1/chat/completions"
    assert body["messages"][1] == {"role": "user", "content": "Why 30?"}
    assert "You are a chess teacher." in body["messages"][0]["content"]
