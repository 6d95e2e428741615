"""A round's DecisionBatch as numpy arrays, packed or not (RunRoundRequest.packed_decisions).

The worker packs what the manager asks packed: one copy of each array's bytes, where a list of
numbers costs a Python object per decision (about 40 ms a round for 5·10^5 agents). The manager
reads both forms through `decision_arrays`, which checks the packed bytes (a malformed batch is
a ValueError naming the field, never a misread decision)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from worker_server.rpc import worker_pb2 as pb

_IDS = "<i8"
_VALUES = "<f8"


@dataclass(frozen=True)
class DecisionArrays:
    ids: np.ndarray  # int64, agents with a valid decision
    values: np.ndarray  # float64, aligned with ids
    invalid_ids: np.ndarray  # int64
    late_ids: np.ndarray  # int64

    @property
    def answered(self) -> int:
        return len(self.ids) + len(self.invalid_ids) + len(self.late_ids)


def fill_batch(
    batch: pb.DecisionBatch,
    ids: np.ndarray,
    values: np.ndarray,
    invalid_ids: np.ndarray,
    late_ids: np.ndarray,
    packed: bool,
) -> pb.DecisionBatch:
    """Put the arrays into the batch, packed or as the repeated fields."""
    if packed:
        batch.packed_agent_ids = np.ascontiguousarray(ids, dtype=_IDS).tobytes()
        batch.packed_values = np.ascontiguousarray(values, dtype=_VALUES).tobytes()
        batch.packed_invalid_ids = np.ascontiguousarray(invalid_ids, dtype=_IDS).tobytes()
        batch.packed_late_ids = np.ascontiguousarray(late_ids, dtype=_IDS).tobytes()
    else:
        batch.agent_ids.extend(ids.tolist())
        batch.values.extend(values.tolist())
        batch.invalid_ids.extend(invalid_ids.tolist())
        batch.late_ids.extend(late_ids.tolist())
    return batch


def decision_arrays(batch: pb.DecisionBatch) -> DecisionArrays:
    """The batch's decisions, whichever form it came in (ValueError when malformed)."""
    packed = (
        batch.packed_agent_ids
        or batch.packed_values
        or batch.packed_invalid_ids
        or batch.packed_late_ids
    )
    if not packed:
        ids = np.asarray(batch.agent_ids, dtype=np.int64)
        values = np.asarray(batch.values, dtype=np.float64)
        invalid = np.asarray(batch.invalid_ids, dtype=np.int64)
        late = np.asarray(batch.late_ids, dtype=np.int64)
    else:
        if batch.agent_ids or batch.values or batch.invalid_ids or batch.late_ids:
            raise ValueError("decisions: packed and repeated fields in one batch")
        ids = _unpack(batch.packed_agent_ids, _IDS, "packed_agent_ids")
        values = _unpack(batch.packed_values, _VALUES, "packed_values")
        invalid = _unpack(batch.packed_invalid_ids, _IDS, "packed_invalid_ids")
        late = _unpack(batch.packed_late_ids, _IDS, "packed_late_ids")
    if len(ids) != len(values):
        raise ValueError(f"decisions: {len(values)} values for {len(ids)} agent ids (one each)")
    return DecisionArrays(ids, values, invalid, late)


def _unpack(data: bytes, dtype: str, name: str) -> np.ndarray:
    if len(data) % 8:
        raise ValueError(f"decisions.{name}: 8-byte little-endian numbers, not {len(data)} bytes")
    return np.frombuffer(data, dtype=dtype)
