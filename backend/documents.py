"""User documents (population and simulation configs): YAML or JSON text read into a mapping.

Reading never evaluates anything (yaml.safe_load). A document that cannot be read at all is a
ConfigError naming where; validating the mapping is each config model's job.
"""

from __future__ import annotations

import json
from typing import Any

import yaml


class ConfigError(ValueError):
    """The document could not be read at all (syntax, not a mapping): nothing to validate."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def errors(self) -> list[dict[str, Any]]:
        """The same shape as pydantic's `ValidationError.errors()`, for one 422 format."""
        return [{"type": "config_syntax", "loc": (self.field,), "msg": self.message}]


def load_document(text: str) -> dict[str, Any]:
    """A mapping from YAML or JSON text; ConfigError when it cannot be read as one."""
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                "(document)", f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
            raise ConfigError(
                "(document)", f"{where}{getattr(exc, 'problem', None) or exc}"
            ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "(document)", f"expected a mapping at the top level, got {type(data).__name__}"
        )
    return data
