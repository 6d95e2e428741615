"""Prompt templates: only {identifier} placeholders are replaced, by plain string values.

Templates come from users over the network, so nothing is formatted (str.format would allow
{persona.__class__} attribute access) or evaluated: a regex finds {name} where name is an
identifier, and everything else, braces included, stays as written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from worker_server.llm.spec import InvalidLlmRequest

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Placeholders the round fills in for every agent, besides the agent's attributes by name.
ROUND_PLACEHOLDERS = frozenset({"persona", "history", "round", "min", "max", "ratio", "offset"})

# Text sizes user input can steer, bounded so that a short config can never make a process render
# gigabytes: every template is checked against these before any work (manager and worker alike).
MAX_PERSONA_CHARS = 20_000
# A rendered prompt (system and user together), a persona metaprompt, an interview's context.
MAX_PROMPT_CHARS = 100_000
# An attribute's value as a placeholder fills it in: a category name (at most 200 characters) or
# a bin's sampled integer.
MAX_ATTRIBUTE_CHARS = 200
# {round}, {min}, {max}, {ratio}, {offset}: numbers as number_text writes them.
MAX_NUMBER_CHARS = 32
# {history}: one line per remembered round (at most 255), each a fixed sentence around 3 numbers.
MAX_HISTORY_LINE_CHARS = 128
MAX_HISTORY_CHARS = 255 * MAX_HISTORY_LINE_CHARS


def round_placeholder_limits() -> dict[str, int]:
    """The longest value each round placeholder can take; attributes take MAX_ATTRIBUTE_CHARS."""
    limits = dict.fromkeys(ROUND_PLACEHOLDERS, MAX_NUMBER_CHARS)
    limits.update(persona=MAX_PERSONA_CHARS, history=MAX_HISTORY_CHARS)
    return limits


def too_long(what: str, longest: int, limit: int) -> str:
    """The reason a template is refused for what it could render to."""
    return (
        f"{what} can render to {longest:,} characters, over the limit of {limit:,}: "
        "use fewer or shorter placeholders"
    )


class Template:
    """A template split once into literal text and placeholder names, rendered per agent."""

    __slots__ = ("text", "_literals", "names")

    def __init__(self, text: str) -> None:
        self.text = text
        parts = PLACEHOLDER.split(text)
        self._literals = parts[0::2]
        self.names: tuple[str, ...] = tuple(parts[1::2])

    def render(self, values: Mapping[str, str]) -> str:
        """Fill each placeholder from values; one with no value is left as written."""
        if not self.names:
            return self.text
        out = [self._literals[0]]
        for name, literal in zip(self.names, self._literals[1:], strict=True):
            value = values.get(name)
            out.append(f"{{{name}}}" if value is None else value)
            out.append(literal)
        return "".join(out)

    def longest(self, limits: Mapping[str, int], default: int = MAX_ATTRIBUTE_CHARS) -> int:
        """The most characters render() can return when each placeholder's value is at most
        limits[name] (default for names not listed) characters long."""
        return sum(map(len, self._literals)) + sum(limits.get(n, default) for n in self.names)

    def check(self, known: Collection[str], field: str) -> None:
        """InvalidLlmRequest naming the first placeholder not in `known`."""
        for name in self.names:
            if name not in known:
                listed = ", ".join(sorted(known)) or "none"
                raise InvalidLlmRequest(
                    f"{field}: unknown placeholder {{{name}}} (known: {listed})"
                )


def fill(template: str, values: Mapping[str, str]) -> str:
    return Template(template).render(values)


def number_text(value: float) -> str:
    """A number as agents read it: at most two decimals, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


@dataclass(frozen=True)
class Feedback:
    """A past round's public outcome, as told to the agents."""

    round: int
    winner: float
    mean: float | None = None


class HistoryText:
    """Renders {history}: one line per past round, oldest first, with the agent's own choice
    next to the outcome. The outcomes are formatted once per round, not once per agent."""

    def __init__(self, history: Sequence[Feedback]) -> None:
        self._lines = []
        for feedback in history:
            outcome = f"the winning number was {number_text(feedback.winner)}"
            if feedback.mean is not None:
                outcome += f" (the mean was {number_text(feedback.mean)})"
            self._lines.append((f"Round {feedback.round}: ", outcome + "."))

    def render(self, choices: Iterable[float]) -> str:
        """choices[i] is the agent's decision in the i-th round of the history: a number, -inf
        when it gave no valid answer that round, NaN when it did not play it (or it is too old
        to remember)."""
        lines = []
        for (head, outcome), choice in zip(self._lines, choices, strict=True):
            if math.isnan(choice):
                lines.append(head + outcome)
            elif math.isinf(choice):
                lines.append(f"{head}you gave no valid number; {outcome}")
            else:
                lines.append(f"{head}you chose {number_text(choice)}; {outcome}")
        return "\n".join(lines)


def history_text(history: Sequence[Feedback], choices: Iterable[float]) -> str:
    return HistoryText(history).render(choices)
