"""An interview in unit tests: a two-agent store and an interview request about its agent."""

from __future__ import annotations

from worker_server.agents import AgentStore
from worker_server.agents.wire import decode_batch
from worker_server.rpc import worker_pb2 as pb

POPULATION = "7"
AGENT = (7 << 32) | 1


def agent_store(persona: str = "You are a chess teacher.") -> AgentStore:
    store = AgentStore(capacity=10)
    batch = pb.AgentBatch(
        population_id=POPULATION,
        agent_ids=[AGENT - 1, AGENT],
        attributes=[pb.AttributeColumn(name="size", categories=["small", "big"], codes=[0, 1])],
        personas=["Someone else.", persona],
    )
    with store.upload() as upload:
        upload.add(decode_batch(batch, 0))
        upload.commit()
    return store


def interview_request(question: str = "Why 30?", **llm) -> pb.InterviewRequest:
    policy = pb.LlmPolicy(
        endpoints=[
            pb.LlmEndpoint(base_url="http://127.0.0.1:9", model="small-m", server="llama_cpp"),
            pb.LlmEndpoint(base_url="http://127.0.0.1:9", model="big-m", server="llama_cpp"),
        ],
        default_model="small-m",
        api="completions",
        temperature=0.7,
        **llm,
    )
    return pb.InterviewRequest(
        population_id=POPULATION,
        agent_id=AGENT,
        question=question,
        llm=policy,
        rule=pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100),
        memory=[
            pb.InterviewMemory(round=1, value=50, status="valid", target=30, winner=35),
            pb.InterviewMemory(round=2, status="invalid", target=20, winner=22),
        ],
    )
