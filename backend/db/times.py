"""Times in the store are naive UTC; on the wire they say so ("...Z") so browsers do not read
them as local time. The one owner of that rule."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def utc_iso(value: datetime) -> str:
    return value.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
