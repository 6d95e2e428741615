"""A worker's last log lines: a bounded ring with sequence numbers, filtered by level."""

from __future__ import annotations

import logging

import pytest

from worker_server.logbuffer import MAX_MESSAGE_CHARS, LogRing


@pytest.fixture
def logger():
    ring = LogRing(capacity=5)
    log = logging.getLogger("test.logbuffer")
    log.setLevel(logging.DEBUG)
    log.addHandler(ring)
    log.propagate = False
    yield log, ring
    log.removeHandler(ring)


def test_keeps_only_the_last_lines_numbered_in_order(logger):
    log, ring = logger
    for i in range(1, 9):
        log.info("line %d", i)
    window = ring.recent(limit=100)
    assert [line.message for line in window.lines] == [f"line {i}" for i in range(4, 9)]
    assert [line.sequence for line in window.lines] == [4, 5, 6, 7, 8]
    assert (window.first_sequence, window.last_sequence, window.capacity) == (4, 8, 5)
    assert window.lines[0].logger == "test.logbuffer" and window.lines[0].level == "INFO"


def test_limit_level_and_after_pick_the_newest_matching_lines(logger):
    log, ring = logger
    log.debug("d1")
    log.warning("w1")
    log.info("i1")
    log.error("e1")
    log.warning("w2")
    assert [x.message for x in ring.recent(limit=2).lines] == ["e1", "w2"]
    warnings = ring.recent(min_level=logging.WARNING)
    assert [x.message for x in warnings.lines] == ["w1", "e1", "w2"]
    assert [x.message for x in ring.recent(after=3).lines] == ["e1", "w2"]
    assert ring.recent(after=5).lines == []  # following: nothing new yet
    log.info("i2")
    assert [x.message for x in ring.recent(after=5).lines] == ["i2"]


def test_tracebacks_are_kept_and_long_messages_cut(logger):
    log, ring = logger
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    log.info("x" * (MAX_MESSAGE_CHARS * 3))
    failed, long = ring.recent().lines
    assert failed.message.startswith("failed\nTraceback") and "RuntimeError: boom" in failed.message
    assert len(long.message) == MAX_MESSAGE_CHARS


def test_an_empty_ring_and_bad_arguments():
    ring = LogRing(capacity=3)
    window = ring.recent()
    assert (window.lines, window.last_sequence, window.first_sequence) == ([], 0, 1)
    with pytest.raises(ValueError):
        ring.recent(limit=0)
    with pytest.raises(ValueError):
        ring.recent(after=-1)
    with pytest.raises(ValueError):
        LogRing(capacity=0)


def test_secrets_in_messages_and_tracebacks_are_redacted(logger):
    # The ring is read from the manager over RecentLogs: no filter upstream is relied on.
    log, ring = logger
    try:
        raise RuntimeError("GET http://llm:8000/v1/models?api_key=sk-live-123 failed")
    except RuntimeError:
        log.exception("probe with Authorization: Bearer tok-abc refused")
    (line,) = ring.recent().lines
    assert "sk-live-123" not in line.message and "tok-abc" not in line.message
    assert "[redacted]" in line.message and "RuntimeError" in line.message
