from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "node", "address", "pid", "agents", "capacity", "cpu_percent", "rss_bytes", "version", "started_at", "population_agents", "rounds_running")
    class PopulationAgentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
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
    POPULATION_AGENTS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_RUNNING_FIELD_NUMBER: _ClassVar[int]
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
    population_agents: _containers.ScalarMap[str, int]
    rounds_running: int
    def __init__(self, worker_id: _Optional[int] = ..., node: _Optional[str] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ..., agents: _Optional[int] = ..., capacity: _Optional[int] = ..., cpu_percent: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., version: _Optional[str] = ..., started_at: _Optional[float] = ..., population_agents: _Optional[_Mapping[str, int]] = ..., rounds_running: _Optional[int] = ...) -> None: ...

class AgentBatch(_message.Message):
    __slots__ = ("population_id", "agent_ids", "attributes", "personas", "memory", "graph")
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    PERSONAS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    population_id: str
    agent_ids: _containers.RepeatedScalarFieldContainer[int]
    attributes: _containers.RepeatedCompositeFieldContainer[AttributeColumn]
    personas: _containers.RepeatedScalarFieldContainer[str]
    memory: AgentMemory
    graph: GraphRows
    def __init__(self, population_id: _Optional[str] = ..., agent_ids: _Optional[_Iterable[int]] = ..., attributes: _Optional[_Iterable[_Union[AttributeColumn, _Mapping]]] = ..., personas: _Optional[_Iterable[str]] = ..., memory: _Optional[_Union[AgentMemory, _Mapping]] = ..., graph: _Optional[_Union[GraphRows, _Mapping]] = ...) -> None: ...

class GraphRows(_message.Message):
    __slots__ = ("offsets", "neighbours")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOURS_FIELD_NUMBER: _ClassVar[int]
    offsets: bytes
    neighbours: bytes
    def __init__(self, offsets: _Optional[bytes] = ..., neighbours: _Optional[bytes] = ...) -> None: ...

class AgentMemory(_message.Message):
    __slots__ = ("simulation_id", "rounds", "values")
    SIMULATION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    simulation_id: str
    rounds: _containers.RepeatedScalarFieldContainer[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, simulation_id: _Optional[str] = ..., rounds: _Optional[_Iterable[int]] = ..., values: _Optional[_Iterable[float]] = ...) -> None: ...

class AttributeColumn(_message.Message):
    __slots__ = ("name", "categories", "codes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    CODES_FIELD_NUMBER: _ClassVar[int]
    name: str
    categories: _containers.RepeatedScalarFieldContainer[str]
    codes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., categories: _Optional[_Iterable[str]] = ..., codes: _Optional[_Iterable[int]] = ...) -> None: ...

class CreateAgentsReply(_message.Message):
    __slots__ = ("created", "agents", "capacity")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    created: int
    agents: int
    capacity: int
    def __init__(self, created: _Optional[int] = ..., agents: _Optional[int] = ..., capacity: _Optional[int] = ...) -> None: ...

class AgentIds(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class DeleteAgentsRequest(_message.Message):
    __slots__ = ("population_id", "ids", "all")
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    population_id: str
    ids: AgentIds
    all: bool
    def __init__(self, population_id: _Optional[str] = ..., ids: _Optional[_Union[AgentIds, _Mapping]] = ..., all: _Optional[bool] = ...) -> None: ...

class DeleteAgentsReply(_message.Message):
    __slots__ = ("deleted", "agents")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    agents: int
    def __init__(self, deleted: _Optional[int] = ..., agents: _Optional[int] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ("population_id", "after_id", "limit")
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    population_id: str
    after_id: int
    limit: int
    def __init__(self, population_id: _Optional[str] = ..., after_id: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class AgentRecord(_message.Message):
    __slots__ = ("id", "population_id", "attributes", "persona", "memory")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    PERSONA_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    id: int
    population_id: str
    attributes: _containers.ScalarMap[str, str]
    persona: str
    memory: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, id: _Optional[int] = ..., population_id: _Optional[str] = ..., attributes: _Optional[_Mapping[str, str]] = ..., persona: _Optional[str] = ..., memory: _Optional[_Iterable[float]] = ...) -> None: ...

class ListAgentsReply(_message.Message):
    __slots__ = ("agents", "next_after_id")
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentRecord]
    next_after_id: int
    def __init__(self, agents: _Optional[_Iterable[_Union[AgentRecord, _Mapping]]] = ..., next_after_id: _Optional[int] = ...) -> None: ...

class GameRule(_message.Message):
    __slots__ = ("ratio", "offset", "min", "max")
    RATIO_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    ratio: float
    offset: float
    min: float
    max: float
    def __init__(self, ratio: _Optional[float] = ..., offset: _Optional[float] = ..., min: _Optional[float] = ..., max: _Optional[float] = ...) -> None: ...

class SyntheticPolicy(_message.Message):
    __slots__ = ("latency_s",)
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    latency_s: float
    def __init__(self, latency_s: _Optional[float] = ...) -> None: ...

class LevelKPolicy(_message.Message):
    __slots__ = ("depth_attribute", "depth_by_category", "default_depth", "noise_std")
    class DepthByCategoryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    DEPTH_ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    DEPTH_BY_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_DEPTH_FIELD_NUMBER: _ClassVar[int]
    NOISE_STD_FIELD_NUMBER: _ClassVar[int]
    depth_attribute: str
    depth_by_category: _containers.ScalarMap[str, int]
    default_depth: int
    noise_std: float
    def __init__(self, depth_attribute: _Optional[str] = ..., depth_by_category: _Optional[_Mapping[str, int]] = ..., default_depth: _Optional[int] = ..., noise_std: _Optional[float] = ...) -> None: ...

class LlmEndpoint(_message.Message):
    __slots__ = ("base_url", "model", "max_concurrency", "server", "api_key_env", "batch_size")
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    base_url: str
    model: str
    max_concurrency: int
    server: str
    api_key_env: str
    batch_size: int
    def __init__(self, base_url: _Optional[str] = ..., model: _Optional[str] = ..., max_concurrency: _Optional[int] = ..., server: _Optional[str] = ..., api_key_env: _Optional[str] = ..., batch_size: _Optional[int] = ...) -> None: ...

class LlmPolicy(_message.Message):
    __slots__ = ("endpoints", "default_model", "model_attribute", "model_by_category", "system_template", "user_template", "api", "answer_mode", "max_tokens", "temperature", "request_timeout_s", "max_retries", "extraction_call", "each_agent_asks", "integer_answers")
    class ModelByCategoryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    MODEL_BY_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    USER_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    API_FIELD_NUMBER: _ClassVar[int]
    ANSWER_MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    EXTRACTION_CALL_FIELD_NUMBER: _ClassVar[int]
    EACH_AGENT_ASKS_FIELD_NUMBER: _ClassVar[int]
    INTEGER_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[LlmEndpoint]
    default_model: str
    model_attribute: str
    model_by_category: _containers.ScalarMap[str, str]
    system_template: str
    user_template: str
    api: str
    answer_mode: str
    max_tokens: int
    temperature: float
    request_timeout_s: float
    max_retries: int
    extraction_call: bool
    each_agent_asks: bool
    integer_answers: bool
    def __init__(self, endpoints: _Optional[_Iterable[_Union[LlmEndpoint, _Mapping]]] = ..., default_model: _Optional[str] = ..., model_attribute: _Optional[str] = ..., model_by_category: _Optional[_Mapping[str, str]] = ..., system_template: _Optional[str] = ..., user_template: _Optional[str] = ..., api: _Optional[str] = ..., answer_mode: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., request_timeout_s: _Optional[float] = ..., max_retries: _Optional[int] = ..., extraction_call: _Optional[bool] = ..., each_agent_asks: _Optional[bool] = ..., integer_answers: _Optional[bool] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ("synthetic", "level_k", "llm", "plugin", "mixed")
    SYNTHETIC_FIELD_NUMBER: _ClassVar[int]
    LEVEL_K_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    MIXED_FIELD_NUMBER: _ClassVar[int]
    synthetic: SyntheticPolicy
    level_k: LevelKPolicy
    llm: LlmPolicy
    plugin: PluginPolicy
    mixed: MixedPolicy
    def __init__(self, synthetic: _Optional[_Union[SyntheticPolicy, _Mapping]] = ..., level_k: _Optional[_Union[LevelKPolicy, _Mapping]] = ..., llm: _Optional[_Union[LlmPolicy, _Mapping]] = ..., plugin: _Optional[_Union[PluginPolicy, _Mapping]] = ..., mixed: _Optional[_Union[MixedPolicy, _Mapping]] = ...) -> None: ...

class MixedPolicy(_message.Message):
    __slots__ = ("parts", "population_size", "multiplier", "offset", "attribute")
    PARTS_FIELD_NUMBER: _ClassVar[int]
    POPULATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[MixedPart]
    population_size: int
    multiplier: int
    offset: int
    attribute: str
    def __init__(self, parts: _Optional[_Iterable[_Union[MixedPart, _Mapping]]] = ..., population_size: _Optional[int] = ..., multiplier: _Optional[int] = ..., offset: _Optional[int] = ..., attribute: _Optional[str] = ...) -> None: ...

class MixedPart(_message.Message):
    __slots__ = ("label", "policy", "bound", "categories")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    label: str
    policy: Policy
    bound: int
    categories: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, label: _Optional[str] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., bound: _Optional[int] = ..., categories: _Optional[_Iterable[str]] = ...) -> None: ...

class PluginPolicy(_message.Message):
    __slots__ = ("name", "params_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    params_json: str
    def __init__(self, name: _Optional[str] = ..., params_json: _Optional[str] = ...) -> None: ...

class PluginRound(_message.Message):
    __slots__ = ("name", "version", "params_json", "feedback_json", "groups", "group_offset")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_JSON_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    GROUP_OFFSET_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    params_json: str
    feedback_json: str
    groups: _containers.RepeatedCompositeFieldContainer[GroupValues]
    group_offset: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., params_json: _Optional[str] = ..., feedback_json: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[GroupValues, _Mapping]]] = ..., group_offset: _Optional[int] = ...) -> None: ...

class GroupValues(_message.Message):
    __slots__ = ("name", "values")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, name: _Optional[str] = ..., values: _Optional[_Iterable[float]] = ...) -> None: ...

class RoundFeedback(_message.Message):
    __slots__ = ("round", "winner", "mean")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    round: int
    winner: float
    mean: float
    def __init__(self, round: _Optional[int] = ..., winner: _Optional[float] = ..., mean: _Optional[float] = ...) -> None: ...

class RunRoundRequest(_message.Message):
    __slots__ = ("round_id", "population_id", "round", "rule", "policy", "feedback", "segment_by", "histogram_bins", "seed", "batch_size", "deadline_s", "simulation_id", "history", "store_responses", "only", "plugin", "network", "packed_decisions", "shared_reads")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BY_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_BINS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_S_FIELD_NUMBER: _ClassVar[int]
    SIMULATION_ID_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    STORE_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    ONLY_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    PACKED_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    SHARED_READS_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    population_id: str
    round: int
    rule: GameRule
    policy: Policy
    feedback: float
    segment_by: _containers.RepeatedScalarFieldContainer[str]
    histogram_bins: int
    seed: int
    batch_size: int
    deadline_s: float
    simulation_id: str
    history: _containers.RepeatedCompositeFieldContainer[RoundFeedback]
    store_responses: bool
    only: AgentIds
    plugin: PluginRound
    network: NetworkRound
    packed_decisions: bool
    shared_reads: SharedReads
    def __init__(self, round_id: _Optional[str] = ..., population_id: _Optional[str] = ..., round: _Optional[int] = ..., rule: _Optional[_Union[GameRule, _Mapping]] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., feedback: _Optional[float] = ..., segment_by: _Optional[_Iterable[str]] = ..., histogram_bins: _Optional[int] = ..., seed: _Optional[int] = ..., batch_size: _Optional[int] = ..., deadline_s: _Optional[float] = ..., simulation_id: _Optional[str] = ..., history: _Optional[_Iterable[_Union[RoundFeedback, _Mapping]]] = ..., store_responses: _Optional[bool] = ..., only: _Optional[_Union[AgentIds, _Mapping]] = ..., plugin: _Optional[_Union[PluginRound, _Mapping]] = ..., network: _Optional[_Union[NetworkRound, _Mapping]] = ..., packed_decisions: _Optional[bool] = ..., shared_reads: _Optional[_Union[SharedReads, _Mapping]] = ...) -> None: ...

class SharedReads(_message.Message):
    __slots__ = ("peers", "self")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[Peer]
    self: int
    def __init__(self_, peers: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., self: _Optional[int] = ...) -> None: ...

class NetworkRound(_message.Message):
    __slots__ = ("run_starts", "run_owners", "size", "peers", "self", "placement", "complete")
    RUN_STARTS_FIELD_NUMBER: _ClassVar[int]
    RUN_OWNERS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    run_starts: _containers.RepeatedScalarFieldContainer[int]
    run_owners: _containers.RepeatedScalarFieldContainer[int]
    size: int
    peers: _containers.RepeatedCompositeFieldContainer[Peer]
    self: int
    placement: str
    complete: bool
    def __init__(self_, run_starts: _Optional[_Iterable[int]] = ..., run_owners: _Optional[_Iterable[int]] = ..., size: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., self: _Optional[int] = ..., placement: _Optional[str] = ..., complete: _Optional[bool] = ...) -> None: ...

class Peer(_message.Message):
    __slots__ = ("worker_id", "address", "credential", "tls")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    address: str
    credential: str
    tls: bool
    def __init__(self, worker_id: _Optional[int] = ..., address: _Optional[str] = ..., credential: _Optional[str] = ..., tls: _Optional[bool] = ...) -> None: ...

class DeliverValuesRequest(_message.Message):
    __slots__ = ("simulation_id", "population_id", "round", "from_worker", "numbers", "values", "placement", "offered", "offered_to")
    SIMULATION_ID_FIELD_NUMBER: _ClassVar[int]
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    FROM_WORKER_FIELD_NUMBER: _ClassVar[int]
    NUMBERS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    OFFERED_FIELD_NUMBER: _ClassVar[int]
    OFFERED_TO_FIELD_NUMBER: _ClassVar[int]
    simulation_id: str
    population_id: str
    round: int
    from_worker: int
    numbers: bytes
    values: bytes
    placement: str
    offered: bytes
    offered_to: bytes
    def __init__(self, simulation_id: _Optional[str] = ..., population_id: _Optional[str] = ..., round: _Optional[int] = ..., from_worker: _Optional[int] = ..., numbers: _Optional[bytes] = ..., values: _Optional[bytes] = ..., placement: _Optional[str] = ..., offered: _Optional[bytes] = ..., offered_to: _Optional[bytes] = ...) -> None: ...

class DeliverValuesReply(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    def __init__(self, accepted: _Optional[int] = ...) -> None: ...

class FetchValuesRequest(_message.Message):
    __slots__ = ("simulation_id", "population_id", "round", "numbers", "pairing", "seed")
    SIMULATION_ID_FIELD_NUMBER: _ClassVar[int]
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    NUMBERS_FIELD_NUMBER: _ClassVar[int]
    PAIRING_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    simulation_id: str
    population_id: str
    round: int
    numbers: bytes
    pairing: bool
    seed: int
    def __init__(self, simulation_id: _Optional[str] = ..., population_id: _Optional[str] = ..., round: _Optional[int] = ..., numbers: _Optional[bytes] = ..., pairing: _Optional[bool] = ..., seed: _Optional[int] = ...) -> None: ...

class FetchValuesReply(_message.Message):
    __slots__ = ("values", "partners")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    PARTNERS_FIELD_NUMBER: _ClassVar[int]
    values: bytes
    partners: bytes
    def __init__(self, values: _Optional[bytes] = ..., partners: _Optional[bytes] = ...) -> None: ...

class ReadDistributionRequest(_message.Message):
    __slots__ = ("simulation_id", "round", "model", "system", "user")
    SIMULATION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    simulation_id: str
    round: int
    model: str
    system: str
    user: str
    def __init__(self, simulation_id: _Optional[str] = ..., round: _Optional[int] = ..., model: _Optional[str] = ..., system: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...

class ReadDistributionReply(_message.Message):
    __slots__ = ("values", "probabilities", "texts", "pruned_mass", "unlisted_bound", "requests", "nodes", "prompt_tokens", "completion_tokens", "elapsed_s", "error", "late", "message", "counts_usage", "usage")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    PRUNED_MASS_FIELD_NUMBER: _ClassVar[int]
    UNLISTED_BOUND_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    COUNTS_USAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    texts: _containers.RepeatedScalarFieldContainer[str]
    pruned_mass: float
    unlisted_bound: float
    requests: int
    nodes: int
    prompt_tokens: int
    completion_tokens: int
    elapsed_s: float
    error: bool
    late: bool
    message: str
    counts_usage: bool
    usage: _containers.RepeatedCompositeFieldContainer[EndpointUsage]
    def __init__(self, values: _Optional[_Iterable[float]] = ..., probabilities: _Optional[_Iterable[float]] = ..., texts: _Optional[_Iterable[str]] = ..., pruned_mass: _Optional[float] = ..., unlisted_bound: _Optional[float] = ..., requests: _Optional[int] = ..., nodes: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., error: _Optional[bool] = ..., late: _Optional[bool] = ..., message: _Optional[str] = ..., counts_usage: _Optional[bool] = ..., usage: _Optional[_Iterable[_Union[EndpointUsage, _Mapping]]] = ...) -> None: ...

class SeedValuesRequest(_message.Message):
    __slots__ = ("simulation_id", "population_id", "round", "numbers", "values", "streaks")
    SIMULATION_ID_FIELD_NUMBER: _ClassVar[int]
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    NUMBERS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    STREAKS_FIELD_NUMBER: _ClassVar[int]
    simulation_id: str
    population_id: str
    round: int
    numbers: bytes
    values: bytes
    streaks: bytes
    def __init__(self, simulation_id: _Optional[str] = ..., population_id: _Optional[str] = ..., round: _Optional[int] = ..., numbers: _Optional[bytes] = ..., values: _Optional[bytes] = ..., streaks: _Optional[bytes] = ...) -> None: ...

class SeedValuesReply(_message.Message):
    __slots__ = ("seeded",)
    SEEDED_FIELD_NUMBER: _ClassVar[int]
    seeded: int
    def __init__(self, seeded: _Optional[int] = ...) -> None: ...

class DecisionBatch(_message.Message):
    __slots__ = ("agent_ids", "values", "invalid_ids", "late_ids", "responses", "invalid_responses", "endpoints", "packed_agent_ids", "packed_values", "packed_invalid_ids", "packed_late_ids")
    AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    INVALID_IDS_FIELD_NUMBER: _ClassVar[int]
    LATE_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    INVALID_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    PACKED_AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    PACKED_VALUES_FIELD_NUMBER: _ClassVar[int]
    PACKED_INVALID_IDS_FIELD_NUMBER: _ClassVar[int]
    PACKED_LATE_IDS_FIELD_NUMBER: _ClassVar[int]
    agent_ids: _containers.RepeatedScalarFieldContainer[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    invalid_ids: _containers.RepeatedScalarFieldContainer[int]
    late_ids: _containers.RepeatedScalarFieldContainer[int]
    responses: _containers.RepeatedScalarFieldContainer[str]
    invalid_responses: _containers.RepeatedScalarFieldContainer[str]
    endpoints: _containers.RepeatedCompositeFieldContainer[EndpointUsage]
    packed_agent_ids: bytes
    packed_values: bytes
    packed_invalid_ids: bytes
    packed_late_ids: bytes
    def __init__(self, agent_ids: _Optional[_Iterable[int]] = ..., values: _Optional[_Iterable[float]] = ..., invalid_ids: _Optional[_Iterable[int]] = ..., late_ids: _Optional[_Iterable[int]] = ..., responses: _Optional[_Iterable[str]] = ..., invalid_responses: _Optional[_Iterable[str]] = ..., endpoints: _Optional[_Iterable[_Union[EndpointUsage, _Mapping]]] = ..., packed_agent_ids: _Optional[bytes] = ..., packed_values: _Optional[bytes] = ..., packed_invalid_ids: _Optional[bytes] = ..., packed_late_ids: _Optional[bytes] = ...) -> None: ...

class SegmentAggregate(_message.Message):
    __slots__ = ("attribute", "category", "count", "sum", "sum_sq")
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    SUM_SQ_FIELD_NUMBER: _ClassVar[int]
    attribute: str
    category: str
    count: int
    sum: float
    sum_sq: float
    def __init__(self, attribute: _Optional[str] = ..., category: _Optional[str] = ..., count: _Optional[int] = ..., sum: _Optional[float] = ..., sum_sq: _Optional[float] = ...) -> None: ...

class PartialAggregate(_message.Message):
    __slots__ = ("count", "sum", "sum_sq", "min", "max", "histogram", "segments", "n_invalid", "n_late", "elapsed_s", "prompt_tokens", "completion_tokens", "llm_errors", "endpoints", "cached_tokens", "network_bytes")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    SUM_SQ_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    N_INVALID_FIELD_NUMBER: _ClassVar[int]
    N_LATE_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LLM_ERRORS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_BYTES_FIELD_NUMBER: _ClassVar[int]
    count: int
    sum: float
    sum_sq: float
    min: float
    max: float
    histogram: _containers.RepeatedScalarFieldContainer[int]
    segments: _containers.RepeatedCompositeFieldContainer[SegmentAggregate]
    n_invalid: int
    n_late: int
    elapsed_s: float
    prompt_tokens: int
    completion_tokens: int
    llm_errors: int
    endpoints: _containers.RepeatedCompositeFieldContainer[EndpointUsage]
    cached_tokens: int
    network_bytes: int
    def __init__(self, count: _Optional[int] = ..., sum: _Optional[float] = ..., sum_sq: _Optional[float] = ..., min: _Optional[float] = ..., max: _Optional[float] = ..., histogram: _Optional[_Iterable[int]] = ..., segments: _Optional[_Iterable[_Union[SegmentAggregate, _Mapping]]] = ..., n_invalid: _Optional[int] = ..., n_late: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., llm_errors: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[EndpointUsage, _Mapping]]] = ..., cached_tokens: _Optional[int] = ..., network_bytes: _Optional[int] = ...) -> None: ...

class EndpointUsage(_message.Message):
    __slots__ = ("base_url", "model", "requests", "errors", "skipped", "last_error", "prompt_tokens", "completion_tokens", "cached_tokens", "late", "latency_counts", "latency_sum_s", "breaker_opened", "breaker_half_opened", "breaker_closed")
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_COUNTS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_SUM_S_FIELD_NUMBER: _ClassVar[int]
    BREAKER_OPENED_FIELD_NUMBER: _ClassVar[int]
    BREAKER_HALF_OPENED_FIELD_NUMBER: _ClassVar[int]
    BREAKER_CLOSED_FIELD_NUMBER: _ClassVar[int]
    base_url: str
    model: str
    requests: int
    errors: int
    skipped: int
    last_error: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    late: int
    latency_counts: _containers.RepeatedScalarFieldContainer[int]
    latency_sum_s: float
    breaker_opened: int
    breaker_half_opened: int
    breaker_closed: int
    def __init__(self, base_url: _Optional[str] = ..., model: _Optional[str] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., skipped: _Optional[int] = ..., last_error: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., late: _Optional[int] = ..., latency_counts: _Optional[_Iterable[int]] = ..., latency_sum_s: _Optional[float] = ..., breaker_opened: _Optional[int] = ..., breaker_half_opened: _Optional[int] = ..., breaker_closed: _Optional[int] = ...) -> None: ...

class RoundMessage(_message.Message):
    __slots__ = ("decisions", "aggregate")
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    decisions: DecisionBatch
    aggregate: PartialAggregate
    def __init__(self, decisions: _Optional[_Union[DecisionBatch, _Mapping]] = ..., aggregate: _Optional[_Union[PartialAggregate, _Mapping]] = ...) -> None: ...

class CancelRoundRequest(_message.Message):
    __slots__ = ("round_id",)
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    def __init__(self, round_id: _Optional[str] = ...) -> None: ...

class CancelRoundReply(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class ProbeLlmRequest(_message.Message):
    __slots__ = ("endpoints", "timeout_s", "check_only")
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    CHECK_ONLY_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[LlmEndpoint]
    timeout_s: float
    check_only: bool
    def __init__(self, endpoints: _Optional[_Iterable[_Union[LlmEndpoint, _Mapping]]] = ..., timeout_s: _Optional[float] = ..., check_only: _Optional[bool] = ...) -> None: ...

class EndpointStatus(_message.Message):
    __slots__ = ("base_url", "model", "ok", "error", "latency_s", "served_models", "error_field")
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    SERVED_MODELS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_FIELD_NUMBER: _ClassVar[int]
    base_url: str
    model: str
    ok: bool
    error: str
    latency_s: float
    served_models: _containers.RepeatedScalarFieldContainer[str]
    error_field: str
    def __init__(self, base_url: _Optional[str] = ..., model: _Optional[str] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ..., latency_s: _Optional[float] = ..., served_models: _Optional[_Iterable[str]] = ..., error_field: _Optional[str] = ...) -> None: ...

class ProbeLlmReply(_message.Message):
    __slots__ = ("endpoints",)
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[EndpointStatus]
    def __init__(self, endpoints: _Optional[_Iterable[_Union[EndpointStatus, _Mapping]]] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("field",)
    FIELD_FIELD_NUMBER: _ClassVar[int]
    field: str
    def __init__(self, field: _Optional[str] = ...) -> None: ...

class GeneratePersonasRequest(_message.Message):
    __slots__ = ("endpoints", "model", "metaprompt", "fallback_template", "attributes", "count", "max_tokens", "temperature", "timeout_s", "max_concurrency", "seed", "first_index")
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    METAPROMPT_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[LlmEndpoint]
    model: str
    metaprompt: str
    fallback_template: str
    attributes: _containers.RepeatedCompositeFieldContainer[AttributeColumn]
    count: int
    max_tokens: int
    temperature: float
    timeout_s: float
    max_concurrency: int
    seed: int
    first_index: int
    def __init__(self, endpoints: _Optional[_Iterable[_Union[LlmEndpoint, _Mapping]]] = ..., model: _Optional[str] = ..., metaprompt: _Optional[str] = ..., fallback_template: _Optional[str] = ..., attributes: _Optional[_Iterable[_Union[AttributeColumn, _Mapping]]] = ..., count: _Optional[int] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., timeout_s: _Optional[float] = ..., max_concurrency: _Optional[int] = ..., seed: _Optional[int] = ..., first_index: _Optional[int] = ...) -> None: ...

class GeneratePersonasReply(_message.Message):
    __slots__ = ("personas", "n_fallback", "prompt_tokens", "completion_tokens")
    PERSONAS_FIELD_NUMBER: _ClassVar[int]
    N_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    personas: _containers.RepeatedScalarFieldContainer[str]
    n_fallback: int
    prompt_tokens: int
    completion_tokens: int
    def __init__(self, personas: _Optional[_Iterable[str]] = ..., n_fallback: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ...) -> None: ...

class InterviewMemory(_message.Message):
    __slots__ = ("round", "value", "status", "target", "winner")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    round: int
    value: float
    status: str
    target: float
    winner: float
    def __init__(self, round: _Optional[int] = ..., value: _Optional[float] = ..., status: _Optional[str] = ..., target: _Optional[float] = ..., winner: _Optional[float] = ...) -> None: ...

class InterviewRequest(_message.Message):
    __slots__ = ("population_id", "agent_id", "question", "llm", "rule", "memory", "max_tokens", "timeout_s")
    POPULATION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    population_id: str
    agent_id: int
    question: str
    llm: LlmPolicy
    rule: GameRule
    memory: _containers.RepeatedCompositeFieldContainer[InterviewMemory]
    max_tokens: int
    timeout_s: float
    def __init__(self, population_id: _Optional[str] = ..., agent_id: _Optional[int] = ..., question: _Optional[str] = ..., llm: _Optional[_Union[LlmPolicy, _Mapping]] = ..., rule: _Optional[_Union[GameRule, _Mapping]] = ..., memory: _Optional[_Iterable[_Union[InterviewMemory, _Mapping]]] = ..., max_tokens: _Optional[int] = ..., timeout_s: _Optional[float] = ...) -> None: ...

class InterviewChunk(_message.Message):
    __slots__ = ("text", "done", "prompt", "model", "prompt_tokens", "completion_tokens", "error")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    text: str
    done: bool
    prompt: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    error: str
    def __init__(self, text: _Optional[str] = ..., done: _Optional[bool] = ..., prompt: _Optional[str] = ..., model: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class RecentLogsRequest(_message.Message):
    __slots__ = ("limit", "min_level", "after_sequence")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MIN_LEVEL_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    limit: int
    min_level: int
    after_sequence: int
    def __init__(self, limit: _Optional[int] = ..., min_level: _Optional[int] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ("sequence", "time", "level", "logger", "message")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    LOGGER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    time: float
    level: str
    logger: str
    message: str
    def __init__(self, sequence: _Optional[int] = ..., time: _Optional[float] = ..., level: _Optional[str] = ..., logger: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RecentLogsReply(_message.Message):
    __slots__ = ("lines", "last_sequence", "first_sequence", "capacity")
    LINES_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedCompositeFieldContainer[LogLine]
    last_sequence: int
    first_sequence: int
    capacity: int
    def __init__(self, lines: _Optional[_Iterable[_Union[LogLine, _Mapping]]] = ..., last_sequence: _Optional[int] = ..., first_sequence: _Optional[int] = ..., capacity: _Optional[int] = ...) -> None: ...
