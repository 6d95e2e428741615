"""Field types that the population and the simulation configs share (one rule, one place)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from worker_server.llm.access import MAX_ENV_NAME, env_name_problem


def _env_name(value: str) -> str:
    problem = env_name_problem(value)
    if problem is not None:
        # The reason goes in the context so braces in it are never formatted.
        raise PydanticCustomError("api_key_env", "{reason}", {"reason": problem})
    return value


# The variable holding an endpoint's API key on the workers (never the key itself).
ApiKeyEnv = Annotated[str, Field(min_length=1, max_length=MAX_ENV_NAME), AfterValidator(_env_name)]
