"""The LLM policy in unit tests: a store whose personas name each agent, an LlmPolicy over
in-process OpenAI-compatible servers, a round request, and the decisions a round played."""

from __future__ import annotations

import re

import numpy as np

from worker_server.agents import AgentStore, decode_batch
from worker_server.rounds import GameRule, PartialAggregate
from worker_server.rpc import worker_pb2 as pb

MODEL = "test-model"
EDUCATION = ["primary school", "doctorate"]
RULE = GameRule(ratio=2 / 3, offset=0.0, min=0.0, max=100.0)
USER = "You are {persona} ({education}).\n{history}\nRound {round} of a game over [{min}, {max}]."
AGENT = re.compile(r"agent-(\d+)")


def agent_of(request) -> int:
    return int(AGENT.search(request.prompt).group(1))


def by_agent(request) -> str:
    """Agent i answers i % 90 in round 1, and 1 more each later round."""
    rounds = re.search(r"Round (\d+) of a game", request.prompt)
    return str(agent_of(request) % 90 + int(rounds.group(1)) - 1)


def make_store(n: int, population_id: str = "p") -> AgentStore:
    store = AgentStore(1_000_000)
    ids = np.arange(n, dtype=np.int64)
    batch = pb.AgentBatch(
        population_id=population_id,
        agent_ids=ids.tolist(),
        attributes=[
            pb.AttributeColumn(name="education", categories=EDUCATION, codes=(ids % 2).tolist())
        ],
        personas=[f"agent-{i}" for i in ids.tolist()],
    )
    with store.upload() as upload:
        upload.add(decode_batch(batch, 0))
        upload.commit()
    return store


def llm_message(*servers, **overrides) -> pb.LlmPolicy:
    fields = {
        "endpoints": [pb.LlmEndpoint(base_url=s.base_url, model=MODEL) for s in servers],
        "default_model": MODEL,
        "user_template": USER,
        "api": "chat",
        "answer_mode": "basic",
        "request_timeout_s": 10,
    }
    fields.update(overrides)
    return pb.LlmPolicy(**fields)


def round_request(llm: pb.LlmPolicy, number: int = 1, **fields) -> pb.RunRoundRequest:
    return pb.RunRoundRequest(
        round_id=f"r{number}-{fields.get('simulation_id', '')}",
        population_id="p",
        round=number,
        rule=pb.GameRule(ratio=RULE.ratio, offset=RULE.offset, min=RULE.min, max=RULE.max),
        policy=pb.Policy(llm=llm),
        seed=7,
        **fields,
    )


async def play(subenv, spec):
    chunks, aggregate = [], None
    async for out in subenv.run(spec):
        if isinstance(out, PartialAggregate):
            aggregate = out
        else:
            chunks.append(out)
    return chunks, aggregate


def decisions(chunks) -> dict[int, float]:
    return {i: v for c in chunks for i, v in zip(c.ids.tolist(), c.values.tolist(), strict=True)}
