"""Getting a number out of a model: constraining the output, and parsing what came back
(the number shape of the LLM layer's AnswerConstraint: see constraints.py).

- Constrained output (answer_mode "basic"): the answer must be a number with at most two
  decimals (none with integer answers) and no leading zeros, optionally after one space; over
  a non-negative range it cannot exceed the range (see NumberConstraint). llama.cpp's server takes it as a GBNF
  `grammar`; vLLM as a regex under `structured_outputs` (`guided_regex` is gone since 0.12).
- Parsing: "basic" answers must be the number (give or take quotes, markdown emphasis, an
  "Answer:" prefix and a final period); "cot" answers give the last number after an
  answer-like cue ("Answer: 42", "my answer is 42"), else the last number in the text.
- Extraction: when parsing fails, the model may be asked once to pull the number out of its
  own text (as in the AgentScope paper).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_NUMBER_RE = re.compile(_NUMBER)
_BASIC_RE = re.compile(rf"(?:answer\s*[:=]?\s*)?({_NUMBER})\.?", re.IGNORECASE)
_CUE_RE = re.compile(
    r"(?:answer|number|choice|choose|pick|report|select|decision)\w*"
    rf"(?:\s+(?:is|would\s+be|will\s+be|of))?\s*[:=]?\s*[*_`\"']*\s*({_NUMBER})",
    re.IGNORECASE,
)
_WRAPPING = " \t\r\n*_`\"'"


_DIGITS = "0123456789"
# Largest bound spelled out digit by digit; beyond it the constraint only caps the digit count.
EXACT_RANGE_LIMIT = 10**9


def _digit_class(low: int, high: int) -> str:
    return str(low) if low == high else f"[{low}-{high}]"


def _same_width(low: str, high: str) -> list[list[str]]:
    """Digit patterns (one class per position) matching exactly the numbers low..high, both of
    the same width: the classic split into a lower edge, a full middle and an upper edge."""
    width = len(low)
    if width == 0:
        return [[]]
    if low[0] == high[0]:
        return [[low[0], *rest] for rest in _same_width(low[1:], high[1:])]
    out: list[list[str]] = []
    first, last = int(low[0]), int(high[0])
    nines, zeros = "9" * (width - 1), "0" * (width - 1)
    if low[1:] != zeros:
        out += [[low[0], *rest] for rest in _same_width(low[1:], nines)]
        first += 1
    if high[1:] != nines:
        last -= 1
    if first <= last:
        out.append([_digit_class(first, last), *["[0-9]"] * (width - 1)])
    if high[1:] != nines:
        out += [[high[0], *rest] for rest in _same_width(zeros, high[1:])]
    return out


def _in_class(char: str, digit_class: str) -> bool:
    """Whether char matches one position of a digit pattern ("7" or "[3-9]")."""
    if not digit_class.startswith("["):
        return char == digit_class
    return char in _DIGITS and digit_class[1] <= char <= digit_class[3]


def integer_patterns(low: int, high: int) -> list[list[str]]:
    """Digit patterns matching exactly the integers low..high (0 <= low), no leading zeros."""
    patterns: list[list[str]] = []
    for width in range(len(str(low)), len(str(high)) + 1):
        start = max(low, 10 ** (width - 1) if width > 1 else 0)
        stop = min(high, 10**width - 1)
        if start <= stop:
            patterns += _same_width(str(start), str(stop))
    return patterns


@dataclass(frozen=True)
class NumberConstraint:
    """The shape of a valid answer for a game over [low, high], in the servers' dialects.

    For a non-negative range (the game's usual [0, 100]) the integer part is spelled out so the
    model cannot write a number above the top (100.5 or 548 are impossible); two decimals are
    allowed below the top. Other ranges only cap the digit count, and the sub-environment
    counts what still falls outside invalid. With `integers` no decimals are allowed.
    """

    low: float
    high: float
    integers: bool = False

    @classmethod
    def for_range(cls, low: float, high: float, integers: bool = False) -> NumberConstraint:
        return cls(low, high, integers)

    @property
    def _exact(self) -> bool:
        return 0 <= self.low <= self.high <= EXACT_RANGE_LIMIT

    @property
    def _integer_digits(self) -> int:
        largest = max(abs(self.low), abs(self.high), 1.0)
        return len(str(int(math.floor(min(largest, 10**15)))))

    def _parts(self) -> list[tuple[list[str], bool]]:
        """(integer digit pattern, decimals allowed) alternatives for an exact range."""
        bottom, top = math.floor(self.low), math.floor(self.high)
        if self.integers:
            bottom = math.ceil(self.low)
            return [(p, False) for p in integer_patterns(bottom, top)] if top >= bottom else []
        top_has_decimals = self.high > top
        parts = [(p, True) for p in integer_patterns(bottom, top - 1)] if top > bottom else []
        parts += [(p, top_has_decimals) for p in integer_patterns(top, top)]
        return parts

    @property
    def regex(self) -> str:
        decimals = "(\\.[0-9]{1,2})?"
        if self._exact:
            alternatives = [
                "".join(p) + (decimals if with_decimals else "")
                for p, with_decimals in self._parts()
            ]
            return f" ?({'|'.join(alternatives)})"
        sign = "-?" if self.low < 0 else ""
        more = self._integer_digits - 1
        integer = f"(0|[1-9][0-9]{{0,{more}}})" if more else "[0-9]"
        return f" ?{sign}{integer}{'' if self.integers else decimals}"

    @property
    def grammar(self) -> str:
        """GBNF, spelled out without {m,n} repetition so older llama.cpp builds take it too."""
        decimals = ' ("." [0-9] [0-9]?)?'

        def digits(pattern: list[str]) -> str:
            return " ".join(c if c.startswith("[") else f'"{c}"' for c in pattern)

        if self._exact:
            alternatives = [
                digits(p) + (decimals if with_decimals else "")
                for p, with_decimals in self._parts()
            ]
            return f'root ::= " "? ({" | ".join(alternatives)})\n'
        more = self._integer_digits - 1
        integer = '("0" | [1-9]' + " [0-9]?" * more + ")" if more else "[0-9]"
        sign = '"-"? ' if self.low < 0 else ""
        return f'root ::= " "? {sign}{integer}{"" if self.integers else decimals}\n'

    def accepts(self, text: str) -> bool:
        """Whether text is a whole answer the constraint allows (what `regex` matches)."""
        return self._compiled.fullmatch(text) is not None

    def is_prefix(self, text: str) -> bool:
        """Whether some allowed answer starts with text ("" and an allowed answer included):
        the texts a constrained generation can have written so far."""
        rest = text[1:] if text.startswith(" ") else text
        if not self._exact and self.low < 0 and rest.startswith("-"):
            rest = rest[1:]
        integer, dot, decimals = rest.partition(".")
        if len(decimals) > 2 or not set(decimals) <= set(_DIGITS):
            return False
        for pattern, with_decimals in self._digit_patterns:
            if len(integer) > len(pattern) or not all(map(_in_class, integer, pattern)):
                continue
            if not dot or (with_decimals and len(integer) == len(pattern)):
                return True
        return False

    # Computed once per constraint: a distribution read asks these about every token it sees.
    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex)

    @cached_property
    def _digit_patterns(self) -> list[tuple[list[str], bool]]:
        """(integer digit pattern, decimals allowed) alternatives, as `regex` spells them."""
        if self._exact:
            return self._parts()
        more = self._integer_digits - 1
        decimals = not self.integers
        return [(["0"], decimals)] + [
            (["[1-9]", *["[0-9]"] * k], decimals) for k in range(more + 1)
        ]

    # Every character a number can continue with (answers are ASCII: see `regex`).
    next_characters = "0123456789.-+ "
    # A distribution read's top-K lists show every way to write one (distribution.can_read).
    spelled_by_top_tokens = True

    def parse(self, text: str, answer_mode: str) -> float:
        return parse_answer(text, answer_mode)

    def extraction_prompt(self, answer: str) -> str:
        return extraction_prompt(answer)

    def body_fields(self, server: str) -> dict:
        """Extra request fields asking `server` for the constrained answer."""
        if server == "llama_cpp":
            return {"grammar": self.grammar}
        if server == "vllm":
            # The vLLM pinned in docker-compose.yml (v0.28.0) documents `structured_outputs`
            # only: `guided_regex` was removed in v0.12.0 and would now be ignored, leaving the
            # answer unconstrained (https://docs.vllm.ai/en/latest/features/structured_outputs/).
            return {"structured_outputs": {"regex": self.regex}}
        return {}


def _to_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def parse_basic(text: str) -> float:
    """The number a basic answer consists of; NaN when it is anything else."""
    match = _BASIC_RE.fullmatch(text.strip(_WRAPPING).rstrip(".").strip(_WRAPPING))
    return _to_float(match.group(1)) if match else math.nan


def parse_cot(text: str) -> float:
    """The last number after an answer-like cue, else the last number in the text; NaN if none."""
    cued = _CUE_RE.findall(text)
    if cued:
        return _to_float(cued[-1])
    numbers = _NUMBER_RE.findall(text)
    return _to_float(numbers[-1]) if numbers else math.nan


def parse_answer(text: str, answer_mode: str) -> float:
    return parse_basic(text) if answer_mode == "basic" else parse_cot(text)


EXTRACTION_PROMPT = (
    "Below is a player's answer in a number-guessing game. Reply with the single number the "
    "player reports as their final choice, and nothing else.\n\n"
    "Player's answer:\n{answer}\n\nNumber:"
)


def extraction_prompt(answer: str) -> str:
    # Replace, not format: the answer is model output and may contain braces.
    return EXTRACTION_PROMPT.replace("{answer}", answer.strip()[:4000])
