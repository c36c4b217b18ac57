"""The one cost function: 0 exactly when a grid is a valid solution keeping every given (the
progressive-search article's violation count): the stochastic solvers' counts are tested against it.
"""

from __future__ import annotations

import numpy as np

from solvers.model.geometry import geometry
from solvers.model.puzzle import Puzzle

GIVEN_WEIGHT = 8


def grid_cost(puzzle: Puzzle, grid: np.ndarray, given_weight: int = GIVEN_WEIGHT) -> int:
    """Return missing values summed over all units, plus `given_weight` per changed given."""
    n = puzzle.box.n
    grid = np.asarray(grid, dtype=np.int64).ravel()
    per_unit = grid[geometry(puzzle.box).units]  # (3N, N)
    present = np.zeros((3 * n, n + 1), dtype=bool)
    np.put_along_axis(present, per_unit, True, axis=1)
    missing = int(3 * n * n - present[:, 1:].sum())
    changed = int(((puzzle.givens > 0) & (puzzle.givens != grid)).sum())
    return missing + given_weight * changed
