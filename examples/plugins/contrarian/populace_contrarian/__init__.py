"""A policy for a simulation this package does not own: El Farol's contrarian.

El Farol (the built-in plugin `el_farol`) declares its own policies; any package can add one
more, as this one does, with a `PolicyEntry` under the entry-point group `populace.policies`.
The contrarian expects the crowd to overreact: it goes when its group's bar was crowded last
round (so the others will stay away) and stays when it was not.

It relies only on what El Farol publishes about itself: an action that is a choice among
("go", "stay"), whose value is the option's index, and the group value `go_ratio` it tells each
group after a round (GET /api/plugins/el_farol).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from populace.plugin import Observation, Params, PolicyEntry, PolicySupport, RulePolicy

GO, STAY = 0.0, 1.0  # El Farol's options, by index


class ContrarianParams(Params):
    first: float = Field(
        0.5,
        ge=0,
        le=1,
        title="Chance of going in round 1",
        description="before any attendance is known",
    )
    crowded_above: float = Field(
        0.6,
        ge=0,
        le=1,
        title="Crowded above",
        description="the share of the group going past which the contrarian calls it crowded",
    )


class Contrarian(RulePolicy):
    """Goes after a crowded round, stays after an uncrowded one; in round 1 goes by chance."""

    params = ContrarianParams

    def decide(self, params: Params, policy: ContrarianParams, observation: Observation):
        first_round = np.where(observation.uniforms(0) < policy.first, GO, STAY)
        last = observation.group.get("go_ratio")
        if last is None:
            return first_round
        after = np.where(last > policy.crowded_above, GO, STAY)
        return np.where(np.isnan(last), first_round, after)


CONTRARIAN = PolicyEntry(
    "el_farol",
    PolicySupport(
        "contrarian",
        "Contrarian",
        "goes when its group's bar was crowded last round, stays when it was not",
        rule=Contrarian,
    ),
)
