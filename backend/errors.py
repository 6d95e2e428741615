"""The refusals the manager's parts raise, by kind; backend.api.errors maps each kind to its HTTP
status once, so routes do not translate errors one by one.

A part raises what went wrong in its own terms (`UnknownSimulation(7)`, `LaunchRefused("...")`)
by subclassing one of these; the message is the answer's detail, written for the person who
sent the request (what is wrong and what to do).
"""

from __future__ import annotations


class DomainError(Exception):
    """A refusal: `http_status` is its HTTP status, `detail` the answer's sentence."""

    http_status = 400

    @property
    def detail(self) -> str:
        return str(self)


class NotFound(DomainError, LookupError):
    """No such item: raised with the id; the detail is "<what> <id> not found"."""

    http_status = 404
    what = "item"

    @property
    def detail(self) -> str:
        return f"{self.what} {self} not found"


class Conflict(DomainError):
    """Not possible in the item's current state (it is running, deploying, busy, ...)."""

    http_status = 409


class Unavailable(DomainError):
    """A part the request needs (a worker, say) did not answer: try again shortly."""

    http_status = 503


class Invalid(DomainError):
    """Input that fits its schema but not the state it names; `loc` names the field as a 422's
    loc does (e.g. ("body", "simulation_id"))."""

    http_status = 422

    def __init__(self, detail: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(detail)
        self.loc = loc
