"""Node labels (`populace worker --labels zone=a,gpu=a100`): the one owner of their rules.

A worker registers with its node's labels; a population's `placement.node_selector` names labels
a worker must carry to host its agents (Kubernetes' nodeSelector), e.g. to keep LLM agents near
their endpoint. Keys and values follow Kubernetes' label syntax, so the same names work in both.
"""

from __future__ import annotations

import re

MAX_LABELS = 32
# Alphanumerics, '-', '_' and '.', beginning and ending with an alphanumeric; at most 63.
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """The labels as given, or ValueError naming the first bad one and why."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels, got {len(labels)}")
    for key, value in labels.items():
        if not isinstance(key, str) or not _NAME.match(key):
            raise ValueError(
                f"label name {key!r}: 1-63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit"
            )
        if not isinstance(value, str) or (value and not _NAME.match(value)):
            raise ValueError(
                f"label {key}={value!r}: the value is empty or 1-63 letters, digits, '-', '_' "
                "or '.', starting and ending with a letter or digit"
            )
    return labels


def parse_labels(text: str) -> dict[str, str]:
    """'zone=a,gpu=a100' -> {'zone': 'a', 'gpu': 'a100'}; ValueError on a malformed one."""
    labels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"label {item!r} is not name=value")
        key, value = key.strip(), value.strip()
        if key in labels:
            raise ValueError(f"label {key!r} given twice")
        labels[key] = value
    return check_labels(labels)


def format_labels(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    """Whether a worker with `labels` may host a population selecting `selector` (all of it)."""
    return all(labels.get(key) == value for key, value in selector.items())
