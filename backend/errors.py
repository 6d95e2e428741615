"""The refusals the manager's parts raise, by kind; backend.api.errors maps each kind to its HTTP
status once, so routes do not translate errors one by one.

A part raises what went wrong in its own terms (`UnknownSimulation(7)`, `LaunchRefused("...")`)
by subclassing one of these; the message is the answer's detail, written for the person who
sent the request (what is wrong and what to do).
"""

from __future__ import annotations


class DomainError(Exception):
    """A refusal: `http_status` is its HTTP status, `detail` the answer's sentence, `headers`
    any the answer needs (Retry-After, say).

    The detail is the message, or, for a kind raised with ids rather than a sentence, its
    `template` filled in with the arguments (`{0}`, `{1}`) and the error itself (`{self.what}`).
    """

    http_status = 400
    headers: dict[str, str] | None = None
    template: str | None = None

    @property
    def detail(self) -> str:
        if self.template is None:
            return str(self)
        return self.template.format(*self.args, self=self)


class NotFound(DomainError, LookupError):
    """No such item: raised with the id; the detail is "<what> <id> not found"."""

    http_status = 404
    what = "item"
    template = "{self.what} {0} not found"


class Forbidden(DomainError):
    """The caller may not do this (e.g. register an address another process serves)."""

    http_status = 403


class Gone(DomainError):
    """The item existed and was removed for good (a removed worker)."""

    http_status = 410


class Conflict(DomainError):
    """Not possible in the item's current state (it is running, deploying, busy, ...)."""

    http_status = 409


class Unavailable(DomainError):
    """A part the request needs (a worker, say) did not answer: try again shortly."""

    http_status = 503

    def __init__(self, detail: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(detail)
        if retry_after_s is not None:
            self.headers = {"Retry-After": str(retry_after_s)}


class Invalid(DomainError):
    """Input that fits its schema but not the state it names; `loc` names the field as a 422's
    loc does (e.g. ("body", "simulation_id"))."""

    http_status = 422

    def __init__(self, detail: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(detail)
        self.loc = loc


class InvalidFields(DomainError):
    """Several fields wrong at once (the LLM endpoints the workers would not call, say):
    `issues` are 422 entries, each {"loc", "msg", "type"}."""

    http_status = 422

    def __init__(self, issues: list[dict]) -> None:
        super().__init__(
            "; ".join(f"{'.'.join(str(p) for p in i['loc'])}: {i['msg']}" for i in issues)
        )
        self.issues = list(issues)
