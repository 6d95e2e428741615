"""What the LLM layer needs to know about an answer: the constraint interface.

The request layer (protocol, answering, distribution) asks a model for an answer of some shape
and turns the reply into a value; it never knows which game asked. An `AnswerConstraint` is that
shape, in the servers' dialects (`body_fields`), as a test of text (`accepts`, `is_prefix`,
`next_characters`: the logprob tree of an exchangeable read walks it), and as the parsing of
what came back (`parse`, `extraction_prompt`). Values are floats, the fast path of the round
wire: a number is itself, a choice is its option's index.

Two shapes exist: a number in a range (`answers.NumberConstraint`, the guessing game's) and a
choice among named options (`ChoiceConstraint`, e.g. El Farol's go/stay, or a yes/no).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

# Around an answer a model may add quotes, markdown emphasis and spaces.
WRAPPING = " \t\r\n*_`\"'"
_ANSWER_PREFIX = re.compile(r"^(?:answer|option|choice)\s*[:=]?\s*", re.IGNORECASE)
_CUE = r"(?:answer|choice|choose|chose|pick|picked|select|decision|option)\w*"


class RequestConstraint(Protocol):
    def body_fields(self, server: str) -> dict:
        """Extra request fields that ask `server` ("llama_cpp", "vllm", "openai") for it."""
        ...


class AnswerConstraint(RequestConstraint, Protocol):
    def accepts(self, text: str) -> bool:
        """Whether text is a whole allowed answer (what the constrained generation can end with)."""
        ...

    def is_prefix(self, text: str) -> bool:
        """Whether some allowed answer starts with text ("" and whole answers included)."""
        ...

    @property
    def next_characters(self) -> str:
        """Every character an allowed answer may continue with."""
        ...

    @property
    def spelled_by_top_tokens(self) -> bool:
        """Whether a model's top-K next tokens show every way to write an answer, so its
        distribution can be read as a tree (worker_server.llm.distribution.can_read)."""
        ...

    def parse(self, text: str, answer_mode: str) -> float:
        """The value of a reply: "basic" (constrained) replies must be the answer, "cot" ones
        give it after reasoning. NaN when there is none."""
        ...

    def extraction_prompt(self, answer: str) -> str:
        """A prompt asking the model to pull the answer out of its own unparseable text."""
        ...


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class ChoiceConstraint:
    """One of named options, optionally after one space; the value is the option's index.

    Options are matched exactly when constrained ("basic"), and case-insensitively, as whole
    words, in free text ("cot": the last one named after a cue such as "I choose", else the last
    one named)."""

    options: tuple[str, ...]
    # A word can be written through tokens outside a top-K list: asked agent by agent.
    spelled_by_top_tokens = False

    def __post_init__(self) -> None:
        if not self.options:
            raise ValueError("a choice needs at least one option")
        folded = [o.casefold() for o in self.options]
        if len(set(folded)) != len(folded):
            raise ValueError("options must differ (ignoring case)")
        for option in self.options:
            if not option or option != option.strip() or not option.isprintable():
                raise ValueError(f"option {option!r}: printable text without outer spaces")

    @property
    def regex(self) -> str:
        return " ?(" + "|".join(re.escape(o) for o in self.options) + ")"

    @property
    def grammar(self) -> str:
        return 'root ::= " "? (' + " | ".join(map(_gbnf_literal, self.options)) + ")\n"

    def body_fields(self, server: str) -> dict:
        if server == "llama_cpp":
            return {"grammar": self.grammar}
        if server == "vllm":
            return {"structured_outputs": {"choice": list(self.options)}}
        return {}

    def accepts(self, text: str) -> bool:
        return _unspaced(text) in self.options

    def is_prefix(self, text: str) -> bool:
        rest = _unspaced(text)
        return any(option.startswith(rest) for option in self.options)

    @cached_property
    def next_characters(self) -> str:
        return "".join(sorted(set(" ".join(self.options)) | {" "}))

    def index_of(self, text: str) -> float:
        """The index of the option text names exactly (ignoring case); NaN for anything else."""
        return self._index.get(text.casefold(), math.nan)

    def parse(self, text: str, answer_mode: str) -> float:
        if answer_mode == "basic":
            bare = text.strip(WRAPPING).rstrip(".").strip(WRAPPING)
            return self.index_of(_ANSWER_PREFIX.sub("", bare).strip(WRAPPING))
        cued = list(self._cued.finditer(text))
        if cued:
            return self.index_of(cued[-1].group(1))
        named = list(self._named.finditer(text))
        return self.index_of(named[-1].group(1)) if named else math.nan

    def extraction_prompt(self, answer: str) -> str:
        options = ", ".join(self.options)
        # Replace, not format: the answer is model output and may contain braces.
        return (
            "Below is a player's answer in a game. Reply with the option the player reports as "
            f"their final choice, one of: {options}; and nothing else.\n\n"
            "Player's answer:\n{answer}\n\nOption:"
        ).replace("{answer}", answer.strip()[:4000])

    @cached_property
    def _index(self) -> dict[str, float]:
        return {option.casefold(): float(i) for i, option in enumerate(self.options)}

    @cached_property
    def _named(self) -> re.Pattern[str]:
        # Longest first, so "go out" wins over "go" where both are options.
        alternatives = "|".join(re.escape(o) for o in sorted(self.options, key=len, reverse=True))
        return re.compile(rf"(?<!\w)({alternatives})(?!\w)", re.IGNORECASE)

    @cached_property
    def _cued(self) -> re.Pattern[str]:
        named = self._named.pattern
        return re.compile(
            rf"{_CUE}(?:\s+(?:is|would\s+be|will\s+be|to))?\s*[:=]?\s*[*_`\"']*\s*{named}",
            re.IGNORECASE,
        )


def _unspaced(text: str) -> str:
    return text[1:] if text.startswith(" ") else text
