"""A worker process's last log lines, kept in memory for the RecentLogs RPC (the dashboard's
log panel on a worker's page).

A logging handler of its own, attached to the root logger next to whatever writes the lines
to stderr (text or JSON), so the format chosen there does not matter here. Bounded: a ring of
`capacity` lines, each cut to MAX_MESSAGE_CHARS; every line gets a sequence number, so a reader
can follow the log by asking for the lines after the last one it saw.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from worker_server.logs import redact

DEFAULT_CAPACITY = 2000
DEFAULT_LIMIT = 200
MAX_MESSAGE_CHARS = 4000


@dataclass(frozen=True)
class LogLine:
    sequence: int
    time: float  # seconds since the Unix epoch
    levelno: int
    level: str
    logger: str
    message: str


@dataclass(frozen=True)
class LogWindow:
    lines: list[LogLine]  # oldest first
    last_sequence: int  # the newest line's number so far (0: none yet)
    first_sequence: int  # the oldest line still kept (older ones were dropped)
    capacity: int


class LogRing(logging.Handler):
    def __init__(self, capacity: int = DEFAULT_CAPACITY, level: int = logging.NOTSET) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        super().__init__(level)
        self.capacity = capacity
        self._lines: deque[LogLine] = deque(maxlen=capacity)
        self._sequence = 0
        # Handler.handle() holds self.lock around emit(); readers take this one too.
        self._guard = threading.Lock()
        # Only the traceback formatting of logging.Formatter is used; the message is the
        # record's own (time, level and logger travel as fields).
        self._formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{self._formatter.formatException(record.exc_info)}"
            elif record.exc_text:
                message = f"{message}\n{record.exc_text}"
            # The stderr handler's filter may not run first (or at all): redact here too, so a
            # token in a traceback never reaches the manager over RecentLogs.
            message = redact(message)
            if len(message) > MAX_MESSAGE_CHARS:
                message = message[: MAX_MESSAGE_CHARS - 1] + "…"
            with self._guard:
                self._sequence += 1
                self._lines.append(
                    LogLine(
                        sequence=self._sequence,
                        time=record.created,
                        levelno=record.levelno,
                        level=record.levelname,
                        logger=record.name,
                        message=message,
                    )
                )
        except Exception:  # logging must never take the process down
            self.handleError(record)

    def recent(self, limit: int = DEFAULT_LIMIT, min_level: int = 0, after: int = 0) -> LogWindow:
        """The newest `limit` lines numbered above `after` at `min_level` or above, oldest first."""
        if limit < 1 or min_level < 0 or after < 0:
            raise ValueError("limit must be >= 1, min_level and after >= 0")
        limit = min(limit, self.capacity)
        picked: list[LogLine] = []
        with self._guard:
            for line in reversed(self._lines):
                if line.sequence <= after or len(picked) == limit:
                    break
                if line.levelno >= min_level:
                    picked.append(line)
            last = self._sequence
            first = self._lines[0].sequence if self._lines else last + 1
        picked.reverse()
        return LogWindow(picked, last, first, self.capacity)
