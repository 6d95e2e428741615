"""Decoding AgentBatch messages: every malformed field is named, with its batch index."""

from __future__ import annotations

import numpy as np
import pytest

from worker_server.agents import InvalidBatch, decode_batch
from worker_server.rpc import worker_pb2 as pb


def good(**overrides):
    fields = {
        "population_id": "p",
        "agent_ids": [3, 1, 2],
        "attributes": [pb.AttributeColumn(name="edu", categories=["a", "b"], codes=[0, 1, 1])],
        "personas": ["x", "y", "z"],
    }
    fields.update(overrides)
    return pb.AgentBatch(**fields)


def test_a_good_batch_decodes_to_columns():
    staged = decode_batch(good(), 4)
    assert staged.index == 4 and staged.population_id == "p"
    assert staged.ids.dtype == np.int64 and staged.ids.tolist() == [3, 1, 2]
    categories, codes = staged.attributes["edu"]
    assert categories == ("a", "b") and codes.tolist() == [0, 1, 1]
    assert [staged.personas.text(i) for i in range(3)] == ["x", "y", "z"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"population_id": ""}, "batch 5: population_id: must not be empty"),
        (
            {"agent_ids": [], "attributes": [], "personas": []},
            "batch 5: agent_ids: the batch has no agents",
        ),
        (
            {"attributes": [pb.AttributeColumn(name="edu", categories=["a"], codes=[0, 0])]},
            "batch 5: attributes['edu'].codes: has 2 codes, agent_ids has 3 agents",
        ),
        (
            {
                "attributes": [
                    pb.AttributeColumn(name="edu", categories=["a", "b"], codes=[0, 2, 1])
                ]
            },
            "batch 5: attributes['edu'].codes: code 2 is out of range: there are 2 categories",
        ),
        (
            {"attributes": [pb.AttributeColumn(name="edu", categories=[], codes=[0, 0, 0])]},
            "code 0 is out of range: there are 0 categories",
        ),
        (
            {"attributes": [pb.AttributeColumn(name="e", categories=["a", "a"], codes=[0, 0, 0])]},
            "batch 5: attributes['e'].categories: has duplicate category names",
        ),
        (
            {"attributes": [pb.AttributeColumn(name="", categories=["a"], codes=[0, 0, 0])]},
            "batch 5: attributes.name: must not be empty",
        ),
        (
            {
                "attributes": [
                    pb.AttributeColumn(name="e", categories=["a"], codes=[0, 0, 0]),
                    pb.AttributeColumn(name="e", categories=["a"], codes=[0, 0, 0]),
                ]
            },
            "batch 5: attributes['e']: the attribute appears twice",
        ),
        (
            {"personas": ["x", "y"]},
            "batch 5: personas: has 2 entries: must be empty or one per agent (3)",
        ),
    ],
)
def test_malformed_batches_are_rejected_naming_batch_and_field(overrides, message):
    with pytest.raises(InvalidBatch) as info:
        decode_batch(good(**overrides), 5)
    assert message in str(info.value)
    assert info.value.batch_index == 5


def with_memory(rounds, values, simulation_id="7"):
    return good(memory=pb.AgentMemory(simulation_id=simulation_id, rounds=rounds, values=values))


def test_memory_decodes_to_one_row_per_agent_with_nan_as_no_valid_answer():
    nan = float("nan")
    staged = decode_batch(with_memory([2, 3], [1.5, nan, 3, 4, nan, nan]), 0)
    memory = staged.memory
    assert memory.simulation_id == "7" and memory.rounds.tolist() == [2, 3]
    assert memory.values.dtype == np.float32 and memory.values.shape == (3, 2)
    assert memory.values.tolist() == [[1.5, -np.inf], [3.0, 4.0], [-np.inf, -np.inf]]
    assert decode_batch(good(), 0).memory is None, "no memory: as before"
    assert decode_batch(with_memory([], []), 0).memory.values.shape == (3, 0)


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        (
            pb.AgentMemory(rounds=[1], values=[1, 2, 3]),
            "batch 2: memory.simulation_id: must not be empty",
        ),
        (
            pb.AgentMemory(simulation_id="s", rounds=[1, 2], values=[1, 2, 3]),
            "batch 2: memory.values: has 3 values: needs one per agent and round, "
            "3 agents x 2 rounds = 6",
        ),
        (
            pb.AgentMemory(simulation_id="s", rounds=[2, 2], values=[0] * 6),
            "batch 2: memory.rounds: must be strictly increasing",
        ),
        (
            pb.AgentMemory(simulation_id="s", rounds=[3, 1], values=[0] * 6),
            "batch 2: memory.rounds: must be strictly increasing",
        ),
        (
            pb.AgentMemory(simulation_id="s", rounds=[0], values=[0] * 3),
            "batch 2: memory.rounds: round 0: rounds are 1-based",
        ),
        (
            pb.AgentMemory(simulation_id="s", rounds=[1], values=[0, float("inf"), 0]),
            "batch 2: memory.values: must be finite, or NaN for no valid answer",
        ),
        (
            pb.AgentMemory(simulation_id="s", rounds=[1], values=[0, 1e300, 0]),
            "batch 2: memory.values: a value is beyond float32's range",
        ),
    ],
)
def test_malformed_memory_is_rejected_naming_batch_and_field(memory, message):
    with pytest.raises(InvalidBatch) as info:
        decode_batch(good(memory=memory), 2)
    assert message in str(info.value)
