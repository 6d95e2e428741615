"""Give freed heap memory back to the OS after big uploads and deletes.

Decoding an upload allocates and frees tens of MiB in chunks below glibc's mmap threshold; the
freed pages stay in the process (and in its rss, which capacity and heartbeats report) until
malloc_trim returns them. A no-op where glibc is not the allocator.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_heap() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
