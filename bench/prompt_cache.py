"""`populace bench prompt-cache`: how much of each prompt llama.cpp's server reuses (issue 13).

One Gemma 3 270M server (llama.cpp, extra llm-local) answers one round's prompts for N agents,
one request after another, rendered from the default template as it was before issue 13 (the
roleplay character before the game rules, the agent's history before the round) and from
today's default (backend.simulations.prompts: what all agents share first, the agent's own
part last). Prompts are built as the workers build them: backend.simulations.prompts.build, the
worker's Template and HistoryText with the round's values (worker_server.rounds.llm), and
Generation.body with the number grammar (what the worker sends to /v1/completions). Each
template's prompts go twice, in the order old, new, new, old, each pass after a prompt that
shares nothing with them; tokens are per pass, times over both.

llama-cpp-python 0.3.36 reports no cached tokens in `usage` (it has only prompt_tokens,
completion_tokens, total_tokens); with --verbose its server logs, per request, "Llama.generate:
N prefix-match hit, remaining M prompt tokens to eval" (N tokens of the previous prompt's KV
cache kept; no line: nothing kept). The bench reads that line from the server's log after each
request; a server that reports `usage.prompt_tokens_details.cached_tokens` is taken at its word.
Prints one JSON line.
"""

from __future__ import annotations

import math
import random
import re
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from backend.llm_local import default_threads, start_local_llm
from backend.simulations import prompts
from backend.simulations.config import PromptConfig, RuleConfig
from backend.simulations.spec import DEFAULT_MAX_TOKENS
from bench import processes
from worker_server.llm.answers import NumberConstraint, parse_answer
from worker_server.llm.protocol import Generation
from worker_server.llm.templates import Feedback, HistoryText, Template, number_text

# Agents' own attributes, rendered into personas the way a population's persona template is.
PERSONA = Template(
    "You are a {age}-year-old {occupation} from {region} whose highest education is "
    "{education}. {temper}"
)
ATTRIBUTES = {
    "age": ["19", "27", "34", "46", "58", "71"],
    "occupation": ["nurse", "teacher", "software developer", "farmer", "lawyer", "student"],
    "region": ["the north", "the south", "a large city", "a small town", "the coast"],
    "education": ["high school", "a bachelor's degree", "a master's degree", "a doctorate"],
    "temper": [
        "You like to take risks.",
        "You are careful and think things through.",
        "You trust your first instinct.",
        "You enjoy outsmarting other people.",
    ],
}
_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
_FULL_HIT = "Llama.generate: full prompt already cached"


def persona_first_templates(system: str, rule: RuleConfig) -> tuple[str, str]:
    """The default (system, user) templates before issue 13, for the basic answer mode."""
    user = "{history}\nThis is round {round}. Report your number directly, with no other text.\nAnswer:"
    if system != "roleplay":
        return prompts.system_prompt(system, rule), user
    game = f"# Game rules\n{prompts.rules(rule, named=False)}\n"
    return (
        "You are playing a role in a multiplayer game. Make sure your behaviour fits the "
        "character described below.\n\n# Character\n{persona}\n\n"
        f"{game}\n# Note\n1. Stay true to your character throughout the game.\n"
    ), user


def round_prompts(
    system: str, user: str, rule: RuleConfig, agents: int, round_number: int, seed: int
) -> list[str]:
    """The completions prompt of each agent in round `round_number` (earlier rounds' outcomes
    and each agent's own choices are drawn from `seed`, the same for every template)."""
    rng = random.Random(seed)
    history = []
    for r in range(1, round_number):
        mean = rng.uniform(20, 50)
        history.append(Feedback(round=r, winner=round(mean * 2 / 3, 2), mean=round(mean, 2)))
    history_text = HistoryText(history)
    system_t, user_t = Template(system), Template(user)
    base = {  # as worker_server.rounds.llm._CohortRun.base
        "round": str(round_number),
        "min": number_text(rule.min),
        "max": number_text(rule.max),
        "ratio": f"{rule.resolved[0]:g}",
        "offset": f"{rule.resolved[1]:g}",
    }
    out = []
    for _ in range(agents):
        attributes = {name: rng.choice(values) for name, values in ATTRIBUTES.items()}
        choices = [float(rng.randint(0, 100)) for _ in history]
        values = {
            **attributes,
            **base,
            "persona": PERSONA.render(attributes),
            "history": history_text.render(choices),
        }
        generation = Generation(
            api="completions", model="m", system=system_t.render(values), user=user_t.render(values)
        )
        out.append(generation.body("llama_cpp")["prompt"])
    return out


def _reused(log: str, usage: dict) -> int:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        return details["cached_tokens"]
    if (hit := _PREFIX_HIT.search(log)) is not None:
        return int(hit.group(1))
    if _FULL_HIT in log:
        return int(usage.get("prompt_tokens", 0))
    return 0


class _Server:
    """Requests to one llama.cpp server, one at a time, each with the log lines it caused."""

    def __init__(self, base_url: str, model: str, log_path: Path, rule: RuleConfig) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=300.0)
        self.model = model
        self.log_path = log_path
        self.constraint = NumberConstraint.for_range(rule.min, rule.max)

    def complete(self, prompt: str, seed: int) -> tuple[dict, str, float]:
        body = Generation(
            api="completions",
            model=self.model,
            user=prompt,
            max_tokens=DEFAULT_MAX_TOKENS["basic"],
            temperature=0.7,
            seed=seed,
            constraint=self.constraint,
        ).body("llama_cpp")
        offset = self.log_path.stat().st_size
        start = time.perf_counter()
        resp = self.client.post("/v1/completions", json=body)
        elapsed = time.perf_counter() - start
        resp.raise_for_status()
        with self.log_path.open("rb") as f:
            f.seek(offset)
            log = f.read().decode(errors="replace")
        return resp.json(), log, elapsed


def _measure(server: _Server, prompts_: list[str], seed: int) -> dict:
    # A prompt that shares nothing with the round's: every pass starts from the same cache.
    server.complete("Unrelated text to clear the prefix cache.\nAnswer:", seed)
    prompt_tokens = reused = valid = 0
    times = []
    for i, prompt in enumerate(prompts_):
        reply, log, elapsed = server.complete(prompt, seed + i)
        usage = reply.get("usage") or {}
        prompt_tokens += int(usage.get("prompt_tokens", 0))
        reused += _reused(log, usage)
        valid += not math.isnan(parse_answer(reply["choices"][0].get("text") or "", "basic"))
        times.append(elapsed)
    return {
        "prompt_tokens": prompt_tokens,
        "reused_tokens": reused,
        "valid_answers": valid,
        "times": times,
    }


def _summary(passes: list[dict]) -> dict:
    """Tokens per pass (every pass sends the same prompts), times over all passes."""
    first = passes[0]
    times = [t for p in passes for t in p["times"]]
    return {
        "prompt_tokens": first["prompt_tokens"],
        "reused_tokens": first["reused_tokens"],
        "reused_share": round(first["reused_tokens"] / first["prompt_tokens"], 3)
        if first["prompt_tokens"]
        else 0.0,
        "ms_per_request": round(1000 * statistics.fmean(times), 1),
        "ms_median": round(1000 * statistics.median(times), 1),
        "valid_answers": [p["valid_answers"] for p in passes],
        "reused_per_pass": [p["reused_tokens"] for p in passes],
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(
    *,
    agents: int = 20,
    round_number: int = 2,
    system: str = "roleplay",
    threads: int = 0,
    seed: int = 7,
) -> dict:
    rule = RuleConfig(preset="2/3")
    templates = {
        "persona_first": persona_first_templates(system, rule),
        "shared_first": tuple(
            getattr(prompts.build(PromptConfig(system=system, user="basic"), rule), part)
            for part in ("system", "user")
        ),
    }
    threads = threads or default_threads()
    result: dict = {
        "bench": "prompt-cache",
        "server": "llama.cpp (llama-cpp-python) Gemma 3 270M Q4_K_M",
        "threads": threads,
        "agents": agents,
        "round": round_number,
        "system": system,
        "user": "basic",
        "api": "completions",
    }
    with tempfile.TemporaryDirectory(prefix="populace-prompt-cache-") as tmp:
        log_path = Path(tmp) / "llama.log"
        with start_local_llm(_free_port(), threads=threads, log_path=log_path, verbose=True) as llm:
            for proc in llm.processes:
                processes.track(proc)
            server = _Server(llm.base_url, llm.model, log_path, rule)
            server.complete("Warm-up.\nAnswer:", seed)
            texts = {
                name: round_prompts(system_text, user_text, rule, agents, round_number, seed)
                for name, (system_text, user_text) in templates.items()
            }
            passes: dict[str, list[dict]] = {name: [] for name in templates}
            # ABBA: a drift of the machine's load favours neither template's times.
            for name in ("persona_first", "shared_first", "shared_first", "persona_first"):
                passes[name].append(_measure(server, texts[name], seed))
            for name, measured in passes.items():
                result[name] = _summary(measured)
    old, new = result["persona_first"], result["shared_first"]
    result["time_ratio"] = round(new["ms_per_request"] / old["ms_per_request"], 3)
    return result
