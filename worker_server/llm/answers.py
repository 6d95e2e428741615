"""Getting a number out of a model: constraining the output, and parsing what came back.

- Constrained output (answer_mode "basic"): the answer must be a number with at most two
  decimals, no leading zeros and no more integer digits than the game's range needs (a minus
  sign only when the range has negatives), optionally after one space. A number that still
  falls outside the range is the sub-environment's to count invalid. llama.cpp's server takes it as a GBNF
  `grammar`; vLLM as a regex under `structured_outputs` (and the older `guided_regex`).
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

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_NUMBER_RE = re.compile(_NUMBER)
_BASIC_RE = re.compile(rf"(?:answer\s*[:=]?\s*)?({_NUMBER})\.?", re.IGNORECASE)
_CUE_RE = re.compile(
    r"(?:answer|number|choice|choose|pick|report|select|decision)\w*"
    rf"(?:\s+(?:is|would\s+be|will\s+be|of))?\s*[:=]?\s*[*_`\"']*\s*({_NUMBER})",
    re.IGNORECASE,
)
_WRAPPING = " \t\r\n*_`\"'"


@dataclass(frozen=True)
class NumberConstraint:
    """The shape of a valid answer for a game over [low, high], in the servers' dialects."""

    integer_digits: int
    negative: bool

    @classmethod
    def for_range(cls, low: float, high: float) -> NumberConstraint:
        largest = max(abs(low), abs(high), 1.0)
        digits = len(str(int(math.floor(largest)))) if math.isfinite(largest) else 1
        return cls(integer_digits=max(1, digits), negative=low < 0)

    @property
    def regex(self) -> str:
        sign = "-?" if self.negative else ""
        more = self.integer_digits - 1
        integer = f"(0|[1-9][0-9]{{0,{more}}})" if more else "[0-9]"
        return f" ?{sign}{integer}(\\.[0-9]{{1,2}})?"

    @property
    def grammar(self) -> str:
        """GBNF, spelled out without {m,n} repetition so older llama.cpp builds take it too."""
        more = self.integer_digits - 1
        integer = '("0" | [1-9]' + " [0-9]?" * more + ")" if more else "[0-9]"
        sign = '"-"? ' if self.negative else ""
        return f'root ::= " "? {sign}{integer} ("." [0-9] [0-9]?)?\n'

    def body_fields(self, server: str) -> dict:
        """Extra request fields asking `server` for the constrained answer."""
        if server == "llama_cpp":
            return {"grammar": self.grammar}
        if server == "vllm":
            # structured_outputs since vLLM 0.10; guided_regex before (removed in 0.12).
            return {"structured_outputs": {"regex": self.regex}, "guided_regex": self.regex}
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
