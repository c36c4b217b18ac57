"""How a process that solves chunks keeps its memory (set where it starts solving): freed buffers reused, not
faulted in again, and a parent's objects kept out of its children's garbage collector (docs/decisions.md)."""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Iterator

_M_TRIM_THRESHOLD = -1  # from <malloc.h>
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MB = 64  # buffers below this come from the heap and are reused (a part's records: ~5 MB)
TRIM_THRESHOLD_MB = 256  # free memory at the heap's top kept for the next chunk, not returned at once


def reuse_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds in this process (and those it forks); False where there is no
    glibc `mallopt` (another libc: nothing changes)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_MB << 20)
    return bool(ok and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_MB << 20))


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """Fork inside this block: what exists now stays out of the children's garbage collector; the parent
    collects its own objects again after the block."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
