"""populace.v1.WorkerService: the agents this process hosts, and the rounds they play.

Thin: decoding, validation and the work live in worker_server.agents and worker_server.rounds;
this module maps their errors to gRPC status codes:

- INVALID_ARGUMENT: a malformed batch or request (the message names the field, and for
  CreateAgents the batch index); nothing was created / no agent acted.
- RESOURCE_EXHAUSTED: CreateAgents past capacity ("capacity N, hosting M: K more fit, asked for X").
- ALREADY_EXISTS: RunRound with the round_id of a round running here.
- CANCELLED: RunRound stopped by CancelRound (no aggregate was sent).
- INTERNAL: a policy failed mid-round.
- NOT_FOUND: Interview of an agent this process does not host.
- INVALID_ARGUMENT: RecentLogs with a negative limit, level or sequence.

ProbeLlm and GeneratePersonas only fail on a bad request (INVALID_ARGUMENT naming the field,
an endpoint on a host this worker does not allow among them): an endpoint that does not answer
is reported per endpoint, or falls back per persona. An API key variable this worker does not
have fails that endpoint's probe, and is INVALID_ARGUMENT for RunRound and GeneratePersonas.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import numpy as np

from worker_server.agents import AgentStore, CapacityExceeded, InvalidBatch
from worker_server.agents.heap import release_free_heap
from worker_server.agents.wire import agent_record, decode_batch
from worker_server.interview import AgentNotHosted, Delta, InvalidInterview
from worker_server.interview import answer as interview_answer
from worker_server.interview import prepare as prepare_interview
from worker_server.llm.client import LlmClient
from worker_server.llm.personas import generate_personas, persona_job
from worker_server.llm.probe import probe
from worker_server.llm.shared_reads import SharedReads
from worker_server.llm.spec import InvalidLlmRequest, endpoint_specs, positive_seconds
from worker_server.logbuffer import DEFAULT_LIMIT, LogRing
from worker_server.rounds import (
    InvalidRound,
    PluginFailed,
    RoundAlreadyRunning,
    RoundCancelled,
    RoundFailed,
    SubEnvironment,
)
from worker_server.rounds.aggregate import PartialAggregate
from worker_server.rounds.network import NetworkStates
from worker_server.rounds.wire import aggregate_message, decisions_message, round_spec
from worker_server.rpc import worker_pb2, worker_pb2_grpc
from worker_server.stats import LoadCounters, ProcessSampler

DEFAULT_PAGE = 100
MAX_PAGE = 10_000
DEFAULT_PROBE_TIMEOUT_S = 5.0
# Where an ErrorDetail travels: the message's own name, so the proto owns the key.
ERROR_DETAIL_KEY = f"{worker_pb2.ErrorDetail.DESCRIPTOR.full_name.lower()}-bin"
# The LLM rules' messages about one endpoint field start with it: "endpoints[0].base_url ...".
_ENDPOINT_FIELD = re.compile(r"^endpoints\[(\d+)\]\.(\w+)\b")


def _endpoint_field(message: str) -> str:
    """The endpoint field a message of the LLM rules is about, as a dotted path
    ("endpoints.0.base_url"), or "" when it names none: sent beside the message so the manager
    never reads it out of the text."""
    match = _ENDPOINT_FIELD.match(message)
    return f"endpoints.{match.group(1)}.{match.group(2)}" if match else ""


async def _refuse_llm_request(context: grpc.aio.ServicerContext, exc: InvalidLlmRequest) -> None:
    """INVALID_ARGUMENT with the message, and the field it names as an ErrorDetail."""
    detail = worker_pb2.ErrorDetail(field=_endpoint_field(str(exc)))
    await context.abort(
        grpc.StatusCode.INVALID_ARGUMENT,
        str(exc),
        trailing_metadata=((ERROR_DETAIL_KEY, detail.SerializeToString()),),
    )


@dataclass(frozen=True)
class ProcessIdentity:
    """Facts fixed for the life of the process."""

    node: str
    address: str
    capacity: int
    version: str
    started_at: float  # seconds since the Unix epoch


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(
        self,
        identity: ProcessIdentity,
        sampler: ProcessSampler,
        load: LoadCounters,
        worker_id: Callable[[], int | None],
        store: AgentStore,
        subenv: SubEnvironment,
        llm: LlmClient | None = None,
        logs: LogRing | None = None,
        network: NetworkStates | None = None,
    ) -> None:
        self._identity = identity
        self._sampler = sampler
        self._load = load
        # A callable because the id changes when the manager makes us re-register.
        self._worker_id = worker_id
        self._store = store
        self._subenv = subenv
        # One client per process: endpoint caps hold across every round and persona call.
        self._llm = llm if llm is not None else LlmClient(load)
        # This process's last log lines (an empty ring when the caller keeps none).
        self._logs = logs if logs is not None else LogRing(capacity=1)
        # Network simulations' values: what peers delivered and what this process sends them.
        self._network = network if network is not None else NetworkStates()
        # Exchangeable agents' answer distributions, read once for the cluster (over the same
        # peer channels).
        self._reads = SharedReads(self._network.channel)

    def info(self) -> worker_pb2.WorkerInfo:
        stats = self._sampler.sample()
        return worker_pb2.WorkerInfo(
            worker_id=self._worker_id() or 0,  # 0 = not registered yet, as the proto says
            node=self._identity.node,
            address=self._identity.address,
            pid=stats.pid,
            agents=self._store.total,
            capacity=self._store.capacity,
            cpu_percent=stats.cpu_percent,
            rss_bytes=stats.rss_bytes,
            version=self._identity.version,
            started_at=self._identity.started_at,
            population_agents=self._store.population_counts(),
            rounds_running=self._subenv.rounds_running,
        )

    async def GetInfo(  # noqa: N802 - the names are fixed by the proto
        self, request: worker_pb2.GetInfoRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.WorkerInfo:
        return self.info()

    async def CreateAgents(  # noqa: N802
        self,
        request_iterator: AsyncIterator[worker_pb2.AgentBatch],
        context: grpc.aio.ServicerContext,
    ) -> worker_pb2.CreateAgentsReply:
        try:
            with self._store.upload() as upload:
                index = 0
                async for batch in request_iterator:
                    upload.add(decode_batch(batch, index))
                    index += 1
                created = upload.commit()
        except InvalidBatch as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"nothing created: {exc}")
        except CapacityExceeded as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"nothing created: {exc}")
        finally:
            # Staged batches are garbage now, committed or not.
            release_free_heap()
        return worker_pb2.CreateAgentsReply(
            created=created, agents=self._store.total, capacity=self._store.capacity
        )

    async def DeleteAgents(  # noqa: N802
        self, request: worker_pb2.DeleteAgentsRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.DeleteAgentsReply:
        target = request.WhichOneof("target")
        if target == "population_id" and request.population_id:
            deleted = self._store.delete_population(request.population_id)
            self._network.forget(request.population_id)
        elif target == "ids":
            deleted = self._store.delete_ids(np.asarray(request.ids.ids, dtype=np.int64))
        elif target == "all" and request.all:
            deleted = self._store.delete_all()
            self._network.forget()
        else:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "say what to delete: a non-empty population_id, ids, or all=true",
            )
        if deleted:
            release_free_heap()
        return worker_pb2.DeleteAgentsReply(deleted=deleted, agents=self._store.total)

    async def ListAgents(  # noqa: N802
        self, request: worker_pb2.ListAgentsRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.ListAgentsReply:
        limit = request.limit or DEFAULT_PAGE
        if not 1 <= limit <= MAX_PAGE:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"limit must be in 1..{MAX_PAGE} (0 means {DEFAULT_PAGE}), got {request.limit}",
            )
        after = request.after_id if request.HasField("after_id") else None
        agents, next_after = self._store.list_agents(request.population_id, after, limit)
        reply = worker_pb2.ListAgentsReply(agents=[agent_record(a) for a in agents])
        if next_after is not None:
            reply.next_after_id = next_after
        return reply

    async def RunRound(  # noqa: N802
        self, request: worker_pb2.RunRoundRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.RoundMessage]:
        spec = None
        try:
            spec = round_spec(request, self._llm, self._network, self._reads)
            outputs = self._subenv.run(spec)
            async with contextlib.aclosing(outputs):
                async for output in outputs:
                    if isinstance(output, PartialAggregate):
                        yield aggregate_message(output)
                    else:
                        yield decisions_message(output, request.packed_decisions)
        except InvalidRound as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except RoundAlreadyRunning as exc:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(exc))
        except RoundCancelled as exc:
            await context.abort(grpc.StatusCode.CANCELLED, str(exc))
        except PluginFailed as exc:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except RoundFailed as exc:
            await context.abort(grpc.StatusCode.INTERNAL, str(exc))
        finally:
            if spec is not None and spec.reads is not None:
                spec.reads.finished()  # peers still asking are answered at once

    async def DeliverValues(  # noqa: N802
        self, request: worker_pb2.DeliverValuesRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.DeliverValuesReply:
        try:
            accepted = self._network.take(request)
        except InvalidRound as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return worker_pb2.DeliverValuesReply(accepted=accepted)

    async def FetchValues(  # noqa: N802
        self, request: worker_pb2.FetchValuesRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.FetchValuesReply:
        try:
            values, partners = self._network.fetch(request)
        except InvalidRound as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        reply = worker_pb2.FetchValuesReply(values=values.astype("<f8").tobytes())
        if partners is not None:  # pairing.NONE (-1) travels as 0xFFFFFFFF
            reply.partners = partners.astype("<u4").tobytes()
        return reply

    async def ReadDistribution(  # noqa: N802
        self, request: worker_pb2.ReadDistributionRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.ReadDistributionReply:
        try:
            return await self._reads.serve(request)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except LookupError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))

    async def SeedValues(  # noqa: N802
        self, request: worker_pb2.SeedValuesRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.SeedValuesReply:
        population = self._store.population(request.population_id)
        try:
            # Rebuilding a layout is numpy over the hosted agents' edges: off the event loop.
            seeded = await asyncio.to_thread(self._network.seed, request, population)
        except InvalidRound as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return worker_pb2.SeedValuesReply(seeded=seeded)

    async def CancelRound(  # noqa: N802
        self, request: worker_pb2.CancelRoundRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.CancelRoundReply:
        return worker_pb2.CancelRoundReply(cancelled=self._subenv.cancel(request.round_id))

    async def ProbeLlm(  # noqa: N802
        self, request: worker_pb2.ProbeLlmRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.ProbeLlmReply:
        try:
            specs = endpoint_specs(request.endpoints, access=self._llm.access, missing_keys_ok=True)
            timeout_s = positive_seconds(request.timeout_s, DEFAULT_PROBE_TIMEOUT_S, "timeout_s")
        except InvalidLlmRequest as exc:
            await _refuse_llm_request(context, exc)
        results = await probe(self._llm, specs, timeout_s, check_only=request.check_only)
        return worker_pb2.ProbeLlmReply(
            endpoints=[
                worker_pb2.EndpointStatus(
                    base_url=r.base_url,
                    model=r.model,
                    ok=r.ok,
                    error=r.error,
                    latency_s=r.latency_s,
                    served_models=r.served_models,
                    error_field=_endpoint_field(r.error),
                )
                for r in results
            ]
        )

    async def GeneratePersonas(  # noqa: N802
        self, request: worker_pb2.GeneratePersonasRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.GeneratePersonasReply:
        try:
            job = persona_job(request, self._llm.access)
        except InvalidLlmRequest as exc:
            await _refuse_llm_request(context, exc)
        result = await generate_personas(self._llm, job)
        return worker_pb2.GeneratePersonasReply(
            personas=result.personas,
            n_fallback=result.n_fallback,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
        )

    async def Interview(  # noqa: N802
        self, request: worker_pb2.InterviewRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.InterviewChunk]:
        try:
            job = prepare_interview(request, self._store, self._llm)
        except InvalidInterview as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except AgentNotHosted as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        async with contextlib.aclosing(interview_answer(job)) as parts:
            async for part in parts:
                if isinstance(part, Delta):
                    yield worker_pb2.InterviewChunk(text=part.text)
                else:
                    yield worker_pb2.InterviewChunk(
                        done=True,
                        prompt=part.prompt,
                        model=part.model,
                        prompt_tokens=part.prompt_tokens,
                        completion_tokens=part.completion_tokens,
                        error=part.error,
                    )

    async def RecentLogs(  # noqa: N802
        self, request: worker_pb2.RecentLogsRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.RecentLogsReply:
        for name in ("limit", "min_level", "after_sequence"):
            if getattr(request, name) < 0:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{name} must be >= 0")
        window = self._logs.recent(
            limit=request.limit or DEFAULT_LIMIT,
            min_level=request.min_level,
            after=request.after_sequence,
        )
        return worker_pb2.RecentLogsReply(
            lines=[
                worker_pb2.LogLine(
                    sequence=line.sequence,
                    time=line.time,
                    level=line.level,
                    logger=line.logger,
                    message=line.message,
                )
                for line in window.lines
            ],
            last_sequence=window.last_sequence,
            first_sequence=window.first_sequence,
            capacity=window.capacity,
        )
