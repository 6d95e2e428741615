"""The id, cursor and page parameters of every route, bounded once to their storage range.

Workers, populations and simulations have int32 ids; an agent id is (population_id << 32) |
index, a positive int64 (backend.db.models). An id outside its range is a 422 naming the
parameter, checked before the route runs, instead of a database error (a 500) or a response that
has already started streaming.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from backend.api.errors import invalid_input
from backend.db.models import INT32_MAX, INT64_MAX
from backend.populations.store import INDEX_BITS

# The smallest agent id: index 0 of population 1.
AGENT_ID_MIN = 1 << INDEX_BITS

WorkerId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a worker's id")]
PopulationId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a population's id")]
SimulationId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a simulation's id")]
AgentId = Annotated[
    int,
    Path(ge=AGENT_ID_MIN, le=INT64_MAX, description="an agent's id: (population_id << 32) | index"),
]

# Filters (all optional).
PopulationFilter = Annotated[
    int | None, Query(ge=1, le=INT32_MAX, description="only this population's")
]
WorkerFilter = Annotated[int | None, Query(ge=1, le=INT32_MAX, description="only this worker's")]
SimulationFilter = Annotated[
    int | None, Query(ge=1, le=INT32_MAX, description="only this simulation's")
]
SweepFilter = Annotated[int | None, Query(ge=1, le=INT32_MAX, description="only this sweep's")]
RoundFilter = Annotated[int | None, Query(ge=1, le=INT32_MAX, description="only this round")]

# Keyset cursors: the last id (or round) of the previous page.
AfterId = Annotated[
    int | None, Query(ge=0, le=INT32_MAX, description="id of the last item of the previous page")
]
AfterAgentId = Annotated[
    int | None, Query(ge=0, le=INT64_MAX, description="id of the last agent of the previous page")
]
AfterRound = Annotated[
    int | None, Query(ge=0, le=INT32_MAX, description="last round of the previous page")
]
Limit = Annotated[int, Query(ge=1, le=1000, description="items per page")]


def attribute_filter(attribute: str | None) -> tuple[str, str] | None:
    """`?attribute=name:value` as (name, value); a 422 naming the parameter otherwise."""
    if attribute is None:
        return None
    name, sep, value = attribute.partition(":")
    if not sep or not name or not value:
        raise invalid_input(
            ("query", "attribute"), "expected name:value, e.g. education:doctorate", "value_error"
        )
    return name, value
