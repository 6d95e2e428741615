"""The LLM side of a worker process: an OpenAI-compatible client with routing, caps, deadlines
and retries; prompt templates; answer constraints and parsing; probes; persona writing."""

from worker_server.llm.client import LlmClient, LlmFailure, LlmTimeout, Route
from worker_server.llm.protocol import Completion, Generation
from worker_server.llm.spec import EndpointSpec, InvalidLlmRequest, endpoint_specs

__all__ = [
    "Completion",
    "EndpointSpec",
    "Generation",
    "InvalidLlmRequest",
    "LlmClient",
    "LlmFailure",
    "LlmTimeout",
    "Route",
    "endpoint_specs",
]
