"""A round's decisions in both wire forms (worker_server/rpc/decision_batch.py): the packed
bytes the manager asks for and the repeated fields other clients get read back the same, and a
malformed packed batch is refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest

from worker_server.rounds.decision_batch import decision_arrays, fill_batch
from worker_server.rpc import worker_pb2 as pb

IDS = np.array([(7 << 32) | 3, (7 << 32) | 9, 1], dtype=np.int64)
VALUES = np.array([0.5, np.nan, -2.25])
INVALID = np.array([(7 << 32) | 4], dtype=np.int64)
LATE = np.array([5, 6], dtype=np.int64)


@pytest.mark.parametrize("packed", [True, False])
def test_both_forms_read_back_the_same_arrays(packed):
    batch = fill_batch(pb.DecisionBatch(), IDS, VALUES, INVALID, LATE, packed)
    # Through the wire, as the manager receives it.
    arrays = decision_arrays(pb.DecisionBatch.FromString(batch.SerializeToString()))
    np.testing.assert_array_equal(arrays.ids, IDS)
    np.testing.assert_array_equal(arrays.values, VALUES)  # NaN included
    np.testing.assert_array_equal(arrays.invalid_ids, INVALID)
    np.testing.assert_array_equal(arrays.late_ids, LATE)
    assert arrays.answered == 6
    assert bool(batch.packed_agent_ids) is packed and bool(len(batch.agent_ids)) is not packed


def test_the_packed_form_holds_the_bytes_and_no_list():
    ids = np.arange(10_000, dtype=np.int64)
    batch = fill_batch(pb.DecisionBatch(), ids, ids * 0.5, ids[:0], ids[:0], packed=True)
    assert len(batch.packed_agent_ids) == len(batch.packed_values) == 80_000
    assert len(batch.agent_ids) == len(batch.values) == 0


@pytest.mark.parametrize(
    "batch, match",
    [
        (pb.DecisionBatch(packed_agent_ids=b"\0" * 12), "packed_agent_ids: 8-byte"),
        (
            pb.DecisionBatch(packed_agent_ids=b"\0" * 16, packed_values=b"\0" * 8),
            "1 values for 2 agent ids",
        ),
        (pb.DecisionBatch(packed_late_ids=b"\0" * 8, agent_ids=[1], values=[1.0]), "packed and"),
        (pb.DecisionBatch(agent_ids=[1, 2], values=[1.0]), "1 values for 2 agent ids"),
    ],
)
def test_a_malformed_batch_is_refused_naming_the_field(batch, match):
    with pytest.raises(ValueError, match=match):
        decision_arrays(batch)
