"""Why an agent upload was refused; the servicer maps these to gRPC status codes."""

from __future__ import annotations


class InvalidBatch(ValueError):
    """A malformed batch (INVALID_ARGUMENT); the message names the batch index and the field."""

    def __init__(self, batch_index: int, field: str, problem: str) -> None:
        super().__init__(f"batch {batch_index}: {field}: {problem}")
        self.batch_index = batch_index
        self.field = field


class CapacityExceeded(Exception):
    """The upload would take this process past its capacity (RESOURCE_EXHAUSTED)."""

    def __init__(self, capacity: int, hosting: int, reserved: int, asked: int) -> None:
        fit = max(0, capacity - hosting - reserved)
        others = f" ({reserved} reserved by other uploads in progress)" if reserved else ""
        super().__init__(
            f"capacity {capacity}, hosting {hosting}{others}: {fit} more fit, asked for {asked}"
        )
        self.capacity = capacity
        self.hosting = hosting
        self.fit = fit
        self.asked = asked
