"""The LLM side of a worker process: an OpenAI-compatible client with routing, caps, circuit
breakers, deadlines and retries; per-endpoint usage; prompt templates; answer constraints and
parsing; probes; persona writing; which hosts it may call and where its API keys come from."""

from worker_server.llm.access import HostNotAllowed, LlmAccess, MissingLlmKey
from worker_server.llm.breaker import CircuitBreaker
from worker_server.llm.client import CircuitOpen, LlmClient, LlmFailure, LlmTimeout, Route
from worker_server.llm.protocol import Completion, Generation
from worker_server.llm.spec import EndpointSpec, InvalidLlmRequest, endpoint_specs
from worker_server.llm.usage import EndpointUsage, UsageTally

__all__ = [
    "CircuitBreaker",
    "CircuitOpen",
    "Completion",
    "EndpointSpec",
    "EndpointUsage",
    "Generation",
    "HostNotAllowed",
    "InvalidLlmRequest",
    "LlmAccess",
    "LlmClient",
    "LlmFailure",
    "LlmTimeout",
    "MissingLlmKey",
    "Route",
    "UsageTally",
    "endpoint_specs",
]
