"""The agents hosted in a worker process: column-wise storage, uploads, views."""

from worker_server.agents.columns import Agent, Attribute, Personas, Population, StagedBatch
from worker_server.agents.errors import CapacityExceeded, InvalidBatch
from worker_server.agents.memory import MemoryLog, StagedMemory
from worker_server.agents.store import AgentStore, Upload
from worker_server.agents.wire import agent_record, decode_batch

__all__ = [
    "Agent",
    "AgentStore",
    "Attribute",
    "CapacityExceeded",
    "InvalidBatch",
    "MemoryLog",
    "Personas",
    "Population",
    "StagedBatch",
    "StagedMemory",
    "Upload",
    "agent_record",
    "decode_batch",
]
