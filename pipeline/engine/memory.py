"""How a process that solves chunks keeps its memory: freed buffers reused, warm objects left out of GC.

Two process-wide settings, made where a process starts solving (a local process's parent before
it forks the pool, a Celery worker's main process before it forks its children), never in the
library's code paths:

* glibc hands every allocation above a threshold (128 KB, rising to at most 32 MB) out of
  fresh `mmap`s and returns them on free, so a chunk's megabyte buffers (its text, givens,
  solutions, columns) were new memory each time: every page faulted in again. 1M easy 9x9
  puzzles in two local processes took 190-240k page faults (~0.5 CPU-s of the kernel's time);
  with the thresholds raised, ~85k. `reuse_freed_memory` raises them.
* A forked process that runs the garbage collector walks, and so writes to, every object it
  inherited: each page of the parent's numba and LLVM objects is copied on first touch.
  `frozen` keeps everything the parent holds at fork time out of the collector, in the
  children (and in the parent only while it forks, as the `gc.freeze` documentation advises).
"""

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
