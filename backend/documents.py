"""User documents (population and simulation configs): YAML or JSON text read into a mapping.

Reading never evaluates anything (safe YAML), and it is bounded, because documents come from
the network: at most MAX_DEPTH levels of nesting and MAX_NODES values once YAML aliases are
expanded (a 1 KB "billion laughs" would otherwise expand to 10^9 values when validated), strict
UTF-8, and only finite numbers and text without NUL (Postgres cannot store NUL; NaN and Infinity
are not JSON). A document that cannot be read is a ConfigError naming where; validating the
mapping is each config model's job.
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

MAX_DEPTH = 64
# Far above any real config (a few thousand values), far below what would stall validation.
MAX_NODES = 200_000
DOCUMENT = "(document)"


class ConfigError(ValueError):
    """The document could not be read at all (syntax, limits, not a mapping): nothing to
    validate. `loc` is where, as a path into the document (("(document)",) for the whole)."""

    def __init__(
        self,
        field: str,
        message: str,
        loc: tuple[str | int, ...] | None = None,
        kind: str = "config_syntax",
    ):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.loc = loc if loc is not None else (field,)
        self.kind = kind

    def errors(self) -> list[dict[str, Any]]:
        """The same shape as pydantic's `ValidationError.errors()`, for one 422 format."""
        return [{"type": self.kind, "loc": self.loc, "msg": self.message}]


def decode_document(raw: bytes) -> str:
    """Strict UTF-8: a byte that is not UTF-8 is refused, not silently replaced."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            DOCUMENT,
            f"not UTF-8 text: byte {raw[exc.start]:#04x} at offset {exc.start} ({exc.reason})",
            kind="utf8_invalid",
        ) from None


def load_document(text: str) -> dict[str, Any]:
    """A mapping from YAML or JSON text; ConfigError when it cannot be read as one."""
    data = _load_json(text) if text.lstrip().startswith(("{", "[")) else _load_yaml(text)
    if not isinstance(data, dict):
        raise ConfigError(
            DOCUMENT, f"expected a mapping at the top level, got {type(data).__name__}"
        )
    check_values(data)
    return data


def load_json(raw: bytes) -> Any:
    """Any JSON value (a request body), with the same limits as a document."""
    data = _load_json(decode_document(raw))
    check_values(data)
    return data


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(DOCUMENT, f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(DOCUMENT, _too_deep(), kind="too_deep") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ConfigError(DOCUMENT, str(exc)) from None


def _load_yaml(text: str) -> Any:
    loader = None
    try:
        loader = _BoundedLoader(text)  # refuses unprintable characters (NUL) already
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(DOCUMENT, f"{where}{getattr(exc, 'problem', None) or exc}") from None
    except ValueError as exc:  # ConfigError from the limits, or a bad date, a huge integer
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(DOCUMENT, str(exc)) from None
    finally:
        if loader is not None:
            loader.dispose()


def _too_deep(where: str = "") -> str:
    return f"{where}nested more than {MAX_DEPTH} levels deep"


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts what the document expands to, alias by alias.

    Each node's expanded size and height are worked out once (aliases share nodes, so a bomb
    has few), which bounds the document in time proportional to its text, before anything is
    constructed or validated.
    """

    def __init__(self, text: str):
        super().__init__(text)
        self._depth = 0
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels)

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._sizes:
                raise self._error(event, f"alias *{event.anchor} refers to a node that contains it")
            return super().compose_node(parent, index)
        event = self.peek_event()
        nests = not isinstance(event, yaml.ScalarEvent)
        self._depth += nests
        if self._depth > MAX_DEPTH:
            raise self._error(event, _too_deep(), "too_deep")
        node = super().compose_node(parent, index)
        self._depth -= nests
        self._measure(node, event)
        return node

    def _measure(self, node: yaml.Node, event) -> None:
        if isinstance(node, yaml.ScalarNode):
            self._sizes[id(node)] = (1, 0)  # levels count collections, as for JSON
            return
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = node.value
        measured = [self._sizes[id(child)] for child in children]
        size = 1 + sum(s for s, _ in measured)
        height = 1 + max((h for _, h in measured), default=0)
        if size > MAX_NODES:
            raise self._error(
                event,
                f"the document has more than {MAX_NODES} values, counting each use of an "
                "alias (*name) in full; write it with fewer aliases",
                "too_large",
            )
        if height > MAX_DEPTH:
            raise self._error(event, _too_deep("through aliases, "), "too_deep")
        self._sizes[id(node)] = (size, height)

    @staticmethod
    def _error(event, message: str, kind: str = "config_syntax") -> ConfigError:
        mark = event.start_mark
        return ConfigError(
            DOCUMENT, f"line {mark.line + 1}, column {mark.column + 1}: {message}", kind=kind
        )


def check_values(data: Any) -> None:
    """Every value is storable and JSON: finite numbers, text without NUL or lone surrogates,
    at most MAX_DEPTH levels and MAX_NODES values. ConfigError at the first offending field."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    seen = 0
    while stack:
        value, loc = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ConfigError(
                DOCUMENT, f"the document has more than {MAX_NODES} values", kind="too_large"
            )
        if isinstance(value, float) and not math.isfinite(value):
            name = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            _value_error(loc, f"{name} is not allowed: numbers must be finite", "finite_number")
        elif isinstance(value, str):
            _check_text(value, loc)
        elif isinstance(value, (dict, list)):
            if len(loc) >= MAX_DEPTH:
                _value_error(loc, _too_deep(), "too_deep")
            if isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(key, str):
                        _check_text(key, (*loc, key))
                    stack.append((item, (*loc, _loc_key(key))))
            else:
                stack.extend((item, (*loc, i)) for i, item in enumerate(value))


def _loc_key(key: Any) -> str | int:
    return key if isinstance(key, str | int) and not isinstance(key, bool) else str(key)


def _check_text(text: str, loc: tuple[str | int, ...]) -> None:
    if "\x00" in text:
        _value_error(loc, "NUL characters (\\u0000) are not allowed in text", "nul_character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        _value_error(loc, "lone UTF-16 surrogates (\\ud800-\\udfff) are not text", "string_unicode")


def _value_error(loc: tuple[str | int, ...], message: str, kind: str) -> None:
    field = ".".join(map(str, loc)) or DOCUMENT
    raise ConfigError(field, message, loc=loc or (DOCUMENT,), kind=kind)
