"""The prompts of the game, after the AgentScope large-scale simulation paper (Pan et al., 2024).

System variants: `plain` states the rules; `rational` adds that all players are rational;
`named` names the game as a variant of "guess 2/3 of the average"; `roleplay` asks the model to
play the agent's persona. User modes: `basic` asks for the number directly, `cot` to think step
by step and then report it.

The rule (range, ratio as a fraction, offset) is written in here on the manager, once per
simulation; the worker fills the placeholders: {round}, the same for every agent of a round, and
the per-agent {persona}, {history} (the agent's own past choices and the feedback, one line per
round) and attributes by name.

Servers reuse the KV cache of the prompt prefix that requests share (vLLM's prefix caching,
llama.cpp's prefix match with the previous prompt), so a default prompt (system, then user) puts
what every agent of a round shares first (the text, the rules, the round) and the agent's own part
last, followed only by the fixed instruction and the "Answer:" cue the answer comes after. The
roleplay character therefore sits in the user prompt, after the round, not in the system prompt
(BENCHMARKS.md, "Prompt-prefix reuse (issue 13)").
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.simulations.config import PromptConfig, RuleConfig, ratio_text


@dataclass(frozen=True)
class Prompts:
    system: str
    user: str
    answer_mode: str  # "basic" or "cot", as the worker's LLM policy names them


def _number(value: float) -> str:
    return f"{value:g}"


def rules(rule: RuleConfig, named: bool, integers: bool = False) -> str:
    ratio, offset = rule.resolved
    target = f"{ratio_text(ratio)} of the average of all reported numbers"
    if offset:
        sign = "plus" if offset > 0 else "minus"
        target = f"{_number(abs(offset))} {sign} {target}"
    kind = "a whole" if integers else "a real"
    lines = [
        f"Each player reports {kind} number between {_number(rule.min)} and "
        f"{_number(rule.max)}, inclusive.",
        f"The winner is the player whose number is closest to {target}.",
        "The game is played over several rounds; after each round every player is told "
        "the winning number.",
    ]
    if named:
        lines.insert(0, 'This game is a variation of the famous "guess 2/3 of the average" game.')
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))


# The agent's own part of the roleplay prompt.
CHARACTER = "# Character\n{persona}\n"


def system_prompt(variant: str, rule: RuleConfig, integers: bool = False) -> str:
    """The variant's system prompt: the same for every agent of the simulation."""
    game = f"# Game rules\n{rules(rule, named=variant == 'named', integers=integers)}\n"
    if variant == "roleplay":
        return (
            "You are playing a role in a multiplayer game. Make sure your behaviour fits the "
            f"character described below.\n\n{game}\n"
            "# Note\n1. Stay true to your character throughout the game.\n"
        )
    note = "\n# Note\n1. All players are rational.\n" if variant == "rational" else ""
    return f"You are playing a multiplayer game.\n\n{game}{note}"


INSTRUCTION = {
    "basic": "Report your number directly, with no other text.\nAnswer:",
    "cot": 'Think step by step, then report your number on the last line as "Answer: <number>".',
}


def user_prompt(mode: str, character: bool) -> str:
    """The round (shared), then the agent's character and history, then the instruction."""
    agent = f"\n{CHARACTER}\n" if character else ""
    return f"This is round {{round}}.\n{agent}{{history}}\n{INSTRUCTION[mode]}"


def build(prompt: PromptConfig, rule: RuleConfig, integers: bool = False) -> Prompts:
    """integers: the players report whole numbers (the LLM policy's integer_answers)."""
    roleplay = prompt.system == "roleplay" and prompt.system_template is None
    system = prompt.system_template or system_prompt(prompt.system, rule, integers)
    if prompt.user_template is None:
        user = user_prompt(prompt.user, character=roleplay)
    else:
        user = prompt.user_template
        if roleplay and "{persona}" not in user:
            # A user template of one's own has no place for the character: it ends the system.
            system += f"\n{CHARACTER}"
    return Prompts(system=system, user=user, answer_mode=prompt.user)
