"""The prompts of the game, after the AgentScope large-scale simulation paper (Pan et al., 2024).

System variants: `plain` states the rules; `rational` adds that all players are rational;
`named` names the game as a variant of "guess 2/3 of the average"; `roleplay` asks the model to
play the agent's persona. User modes: `basic` asks for the number directly, `cot` to think step
by step and then report it.

The rule (range, ratio as a fraction, offset) is written in here on the manager, once per
simulation; the worker fills the per-agent placeholders: {persona}, {history} (the agent's own
past choices and the feedback, one line per round), {round} and attributes by name.
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


def rules(rule: RuleConfig, named: bool) -> str:
    ratio, offset = rule.resolved
    target = f"{ratio_text(ratio)} of the average of all reported numbers"
    if offset:
        sign = "plus" if offset > 0 else "minus"
        target = f"{_number(abs(offset))} {sign} {target}"
    lines = [
        f"Each player reports a real number between {_number(rule.min)} and "
        f"{_number(rule.max)}, inclusive.",
        f"The winner is the player whose number is closest to {target}.",
        "The game is played over several rounds; after each round every player is told "
        "the winning number.",
    ]
    if named:
        lines.insert(0, 'This game is a variation of the famous "guess 2/3 of the average" game.')
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))


def system_prompt(variant: str, rule: RuleConfig) -> str:
    game = f"# Game rules\n{rules(rule, named=variant == 'named')}\n"
    if variant == "roleplay":
        return (
            "You are playing a role in a multiplayer game. Make sure your behaviour fits the "
            "character described below.\n\n# Character\n{persona}\n\n"
            f"{game}\n# Note\n1. Stay true to your character throughout the game.\n"
        )
    note = "\n# Note\n1. All players are rational.\n" if variant == "rational" else ""
    return f"You are playing a multiplayer game.\n\n{game}{note}"


USER = {
    "basic": "{history}\nThis is round {round}. Report your number directly, with no other text.\n"
    "Answer:",
    "cot": "{history}\nThis is round {round}. Think step by step, then report your number on the "
    'last line as "Answer: <number>".',
}


def build(prompt: PromptConfig, rule: RuleConfig) -> Prompts:
    return Prompts(
        system=prompt.system_template or system_prompt(prompt.system, rule),
        user=prompt.user_template or USER[prompt.user],
        answer_mode=prompt.user,
    )
