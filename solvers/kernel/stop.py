"""Stop flags: how another thread tells running solvers to give up (kernels and races check between slices).

A flag is an int64[1] array, 0 until raised (`solve_many(..., stop=flag)`). Who raises it
is the caller's business: the pipeline's `StopPoller` (`pipeline.engine.stop`) does when a job is
purged; the solvers only ever see the array.
"""

from __future__ import annotations

import numpy as np


def new_flag() -> np.ndarray:
    """A lowered stop flag: int64[1], 0."""
    return np.zeros(1, dtype=np.int64)


def raise_flag(flag: np.ndarray) -> None:
    """Raise `flag`: every solver holding it stops at its next check."""
    flag[0] = 1
