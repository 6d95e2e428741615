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
