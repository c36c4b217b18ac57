"""Valid grids of any box shape, built without a solver, for tests of every size."""

from __future__ import annotations

import numpy as np

from solvers.model.puzzle import Box


def pattern_grid(box: Box) -> np.ndarray:
    """Return a valid full grid (uint8[N*N]) for `box` by the shifted-row pattern."""
    r, c, n = box.rows, box.cols, box.n
    grid = np.empty((n, n), dtype=np.uint8)
    for row in range(n):
        shift = (row % r) * c + row // r
        grid[row] = (np.arange(n) + shift) % n + 1
    return grid.ravel()


def blank(grid: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Return a copy of `grid` with `fraction` of its cells emptied (seeded)."""
    rng = np.random.default_rng(seed)
    out = grid.copy()
    out[rng.random(out.size) < fraction] = 0
    return out
