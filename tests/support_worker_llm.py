"""The LLM policy on a real worker process: agents whose personas name them, a round request,
the decision batches a round streamed, and a batched vLLM-style policy."""

from __future__ import annotations

import re
import uuid

import numpy as np

from backend.rounds.fanout import run_round
from backend.workers.grpc_client import AgentColumns, WorkerClient
from worker_server.rpc import worker_pb2 as pb

MODEL = "tiny-test-model"
EDUCATION = ["primary school", "bachelor", "doctorate"]
RULE = pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100)
USER = "You are {persona}, with a {education} education.\n{history}\nThis is round {round}. Answer:"
AGENT = re.compile(r"agent-(\d+)")


def agent_of(request) -> int:
    return int(AGENT.search(request.prompt).group(1))


def by_agent(request) -> str:
    """Agent i answers i % 97, plus 1 per round after the first."""
    round_number = int(re.search(r"This is round (\d+)", request.prompt).group(1))
    return str(agent_of(request) % 97 + round_number - 1)


async def deploy_agents(client: WorkerClient, n: int) -> AgentColumns:
    ids = np.arange(1, n + 1, dtype=np.int64) * 3
    population = AgentColumns(
        population_id=f"llm-{uuid.uuid4().hex[:8]}",
        ids=ids,
        codes={"education": (ids % len(EDUCATION)).astype(np.uint32)},
        categories={"education": EDUCATION},
        personas=[f"agent-{i}" for i in ids.tolist()],
    )
    await client.create_agents(population)
    return population


def round_request(population: AgentColumns, policy: pb.Policy, **fields) -> pb.RunRoundRequest:
    fields.setdefault("round", 1)
    return pb.RunRoundRequest(
        round_id=uuid.uuid4().hex,
        population_id=population.population_id,
        rule=RULE,
        policy=policy,
        seed=11,
        segment_by=["education"],
        **fields,
    )


class Batches:
    """Every DecisionBatch of a round, flattened."""

    def __init__(self) -> None:
        self.decided: dict[int, float] = {}
        self.responses: dict[int, str] = {}
        self.invalid: dict[int, str] = {}
        self.late: set[int] = set()

    def __call__(self, _address: str, batch: pb.DecisionBatch) -> None:
        self.decided.update(zip(batch.agent_ids, batch.values, strict=True))
        if batch.responses:
            self.responses.update(zip(batch.agent_ids, batch.responses, strict=True))
        invalid_texts = batch.invalid_responses or [""] * len(batch.invalid_ids)
        self.invalid.update(zip(batch.invalid_ids, invalid_texts, strict=True))
        self.late.update(batch.late_ids)


async def play(client, request) -> tuple[Batches, pb.PartialAggregate]:
    batches = Batches()
    result = await run_round([client], request, on_decisions=batches)
    (partial,) = result.partials.values()
    return batches, partial


def batched_policy(server, batch_size: int, cap: int = 4, **fields) -> pb.Policy:
    settings = {
        "default_model": MODEL,
        "user_template": USER,
        "api": "completions",
        "answer_mode": "basic",
        "temperature": 0.7,
        "request_timeout_s": 20,
        "max_retries": 1,
    }
    settings.update(fields)
    endpoint = pb.LlmEndpoint(
        base_url=server.base_url,
        model=MODEL,
        max_concurrency=cap,
        server="vllm",
        batch_size=batch_size,
    )
    return pb.Policy(llm=pb.LlmPolicy(endpoints=[endpoint], **settings))
