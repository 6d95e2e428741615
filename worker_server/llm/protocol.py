"""The OpenAI API shapes the workers speak: request bodies and completion replies."""

from __future__ import annotations

from dataclasses import dataclass, field

from worker_server.llm.constraints import RequestConstraint

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
MODELS_PATH = "/v1/models"
# OpenAI-compatible servers take 32-bit seeds at least (llama.cpp's is a uint32).
SEED_MODULUS = 2**31
# llama.cpp samplers off, leaving temperature alone (top_k <= 0 disables it there).
LLAMA_CPP_PLAIN_SAMPLING = {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}


@dataclass(frozen=True)
class Generation:
    """One request for text, before an endpoint (and so its server dialect) is chosen.

    A batched request (completions only) carries several prompts as a prompt array: each is
    `system` + one of `prompts`, and the reply has one choice per prompt, by index. The OpenAI
    API has one `seed` per request, which vLLM applies to every prompt of the array.
    """

    api: str  # "chat" or "completions"
    model: str
    user: str
    system: str = ""
    max_tokens: int = 16
    temperature: float = 0.7
    seed: int | None = None
    constraint: RequestConstraint | None = None
    # Completions only: the users of a prompt array (`user` is then ignored).
    prompts: tuple[str, ...] = ()
    # Completions only: the top `logprobs` tokens of every generated position.
    logprobs: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def path(self) -> str:
        return PATHS[self.api]

    def body(self, server: str) -> dict:
        body: dict = {"model": self.model}
        if self.api == "chat":
            messages = [{"role": "system", "content": self.system}] if self.system else []
            body["messages"] = [*messages, {"role": "user", "content": self.user}]
        elif self.prompts:  # base models, several prompts in one request
            body["prompt"] = [self._prompt(user) for user in self.prompts]
        else:  # base models: one prompt
            body["prompt"] = self._prompt(self.user)
        body["max_tokens"] = self.max_tokens
        body["temperature"] = self.temperature
        if server == "llama_cpp":
            # Plain temperature sampling, as vLLM and OpenAI do by default: llama.cpp's own
            # defaults cut the tail (top-k 40, top-p 0.95, min-p 0.05) and penalise digits
            # already in the prompt, so the same settings would mean another distribution.
            body.update(LLAMA_CPP_PLAIN_SAMPLING)
        if self.logprobs and self.api == "completions":
            body["logprobs"] = self.logprobs
        if self.seed is not None:
            body["seed"] = self.seed % SEED_MODULUS
        if self.constraint is not None:
            body.update(self.constraint.body_fields(server))
        body.update(self.extra)
        return body

    @property
    def size(self) -> int:
        """How many prompts (so choices) the request carries."""
        return len(self.prompts) or 1

    def _prompt(self, user: str) -> str:
        return completion_prompt(self.system, user)


def completion_prompt(system: str, user: str) -> str:
    """A base model's one prompt: the system text, a blank line, the user's text."""
    return f"{system}\n\n{user}" if system else user


@dataclass(frozen=True)
class Choice:
    text: str
    # Per generated token, the top tokens' texts and log-probabilities (when asked for).
    top_logprobs: tuple[dict[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    text: str  # the first choice's
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Seconds from the request's first slot to this answer (retries included).
    elapsed_s: float = 0.0
    # Every choice in index order (a prompt array's answers, or `n` samples).
    choices: tuple[Choice, ...] = ()
    # Prompt tokens the server took from its prefix cache, where it says (0 where it does not).
    cached_tokens: int = 0


def parse_completion(api: str, payload: object, expected: int = 1) -> Completion:
    """Every choice's text (by index: `expected` of them) and the usage; ValueError when the
    reply is not such a completion."""
    if not isinstance(payload, dict):
        raise ValueError("the reply is not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ValueError("the reply has no choices")
    parsed: list[Choice | None] = [None] * expected
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise ValueError("a choice is not an object")
        index = choice.get("index", position)
        if not isinstance(index, int) or not 0 <= index < expected or parsed[index] is not None:
            raise ValueError(f"a choice has a bad index {index!r} (expected 0..{expected - 1})")
        parsed[index] = _choice(api, choice)
    if any(c is None for c in parsed):
        raise ValueError(f"the reply has {len(choices)} choices, expected {expected}")
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    ordered = tuple(c for c in parsed if c is not None)
    return Completion(
        text=ordered[0].text,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        choices=ordered,
        cached_tokens=_cached_tokens(payload, usage),
    )


def _cached_tokens(payload: dict, usage: dict) -> int:
    """OpenAI and vLLM (with --enable-prompt-tokens-details) say it in the usage; llama.cpp's
    own server in its timings."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        return _count(details.get("cached_tokens"))
    timings = payload.get("timings")
    if isinstance(timings, dict):
        return _count(timings.get("cache_n"))
    return 0


def _choice(api: str, choice: dict) -> Choice:
    if api == "chat":
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
    else:
        text = choice.get("text")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ValueError("the reply's text is not a string")
    top: tuple[dict[str, float], ...] = ()
    logprobs = choice.get("logprobs")
    if api == "completions" and isinstance(logprobs, dict):
        entries = logprobs.get("top_logprobs")
        if isinstance(entries, list):
            top = tuple(_top_entry(entry) for entry in entries)
    return Choice(text=text, top_logprobs=top)


def _top_entry(entry: object) -> dict[str, float]:
    if not isinstance(entry, dict):
        return {}  # llama.cpp and vLLM send null for a position they have none for
    return {
        token: float(lp)
        for token, lp in entry.items()
        if isinstance(token, str) and isinstance(lp, (int, float)) and not isinstance(lp, bool)
    }


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def served_models(payload: object) -> list[str]:
    """Model ids listed by GET /v1/models; ValueError when the reply is not such a list."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ValueError("the reply has no model list")
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
