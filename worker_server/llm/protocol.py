"""The OpenAI API shapes the workers speak: request bodies and completion replies."""

from __future__ import annotations

from dataclasses import dataclass, field

from worker_server.llm.answers import NumberConstraint

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
MODELS_PATH = "/v1/models"
# OpenAI-compatible servers take 32-bit seeds at least (llama.cpp's is a uint32).
SEED_MODULUS = 2**31


@dataclass(frozen=True)
class Generation:
    """One request for text, before an endpoint (and so its server dialect) is chosen."""

    api: str  # "chat" or "completions"
    model: str
    user: str
    system: str = ""
    max_tokens: int = 16
    temperature: float = 0.7
    seed: int | None = None
    constraint: NumberConstraint | None = None
    extra: dict = field(default_factory=dict)

    @property
    def path(self) -> str:
        return PATHS[self.api]

    def body(self, server: str) -> dict:
        body: dict = {"model": self.model}
        if self.api == "chat":
            messages = [{"role": "system", "content": self.system}] if self.system else []
            body["messages"] = [*messages, {"role": "user", "content": self.user}]
        else:  # base models: one prompt
            body["prompt"] = f"{self.system}\n\n{self.user}" if self.system else self.user
        body["max_tokens"] = self.max_tokens
        body["temperature"] = self.temperature
        if self.seed is not None:
            body["seed"] = self.seed % SEED_MODULUS
        if self.constraint is not None:
            body.update(self.constraint.body_fields(server))
        body.update(self.extra)
        return body


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Seconds from the request's first slot to this answer (retries included).
    elapsed_s: float = 0.0


def parse_completion(api: str, payload: object) -> Completion:
    """The first choice's text and the usage; ValueError when the reply is not one."""
    if not isinstance(payload, dict):
        raise ValueError("the reply is not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the reply has no choices")
    choice = choices[0]
    if api == "chat":
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
    else:
        text = choice.get("text")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ValueError("the reply's text is not a string")
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(
        text=text,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def served_models(payload: object) -> list[str]:
    """Model ids listed by GET /v1/models; ValueError when the reply is not such a list."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ValueError("the reply has no model list")
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
