from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "node", "address", "pid", "agents", "capacity", "cpu_percent", "rss_bytes", "version", "started_at")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    node: str
    address: str
    pid: int
    agents: int
    capacity: int
    cpu_percent: float
    rss_bytes: int
    version: str
    started_at: float
    def __init__(self, worker_id: _Optional[int] = ..., node: _Optional[str] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ..., agents: _Optional[int] = ..., capacity: _Optional[int] = ..., cpu_percent: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., version: _Optional[str] = ..., started_at: _Optional[float] = ...) -> None: ...
