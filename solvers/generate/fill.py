"""Random full grids: a random first row, then randomised backtracking to a full grid.

Why two methods: for small grids (N <= ROWWISE_MAX) plain row-major backtracking with row/column/box masks is
~10x faster than propagation (a 9x9 grid is ~100 nodes of one AND each); above that its search gets
heavy-tailed, and the propagation + MRV search of `solvers.generate.dig` (randomised ties and values,
restarted after a node budget) takes over. Both draw every choice from a per-grid xorshift stream seeded by
the caller, so the grids are spread over the space of valid grids (the random first row alone covers all N!
relabellings), and the same seeds give the same grids.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.generate.dig import solve_starts, tables
from solvers.kernel.bits import ALL, ONE, ZERO, ctz, pick_mask, rng_next
from solvers.model.puzzle import Box

ROWWISE_MAX = 12  # grid sides filled by row-major backtracking (faster than propagation)
RESTART_NODES = 10  # nodes per cell before a completion starts over
MAX_RESTARTS = 1000  # then the start is declared hopeless (never seen with a random first row)


@njit(cache=True, nogil=True)
def _fill_rows_kernel(n, cell_units, starts, seeds, budget, max_restarts, out, out_restarts):  # type: ignore[no-untyped-def]
    """Complete partial grids cell by cell in row-major order with random values.

    No propagation: one AND per cell for the values still free in its row, column and box, so a 9x9 grid costs
    ~100 cheap nodes. Restarts on the continued random stream after `budget` nodes; out_restarts[b] = -1 when
    the start cannot be completed."""
    nn = n * n
    full = ALL >> np.uint64(64 - n)
    um = np.empty(3 * n, dtype=np.uint64)  # values used per unit
    rem = np.empty(nn, dtype=np.uint64)  # values left to try per cell on the path
    grid = np.empty(nn, dtype=np.int64)
    for b in range(starts.shape[0]):
        rng = np.uint64(seeds[b]) | ONE
        restarts = 0
        while True:
            um[:] = ZERO
            for x in range(nn):
                grid[x] = starts[b, x]
                if grid[x]:
                    v = ONE << np.uint64(grid[x] - 1)
                    for t in range(3):
                        um[cell_units[x, t]] |= v
            x = 0
            nodes = 0
            fresh = True  # entering x forward (else: back from x + 1)
            while 0 <= x < nn:
                if starts[b, x] != 0:
                    x += 1 if fresh else -1
                    continue
                a, c, d = cell_units[x, 0], cell_units[x, 1], cell_units[x, 2]
                if fresh:
                    rem[x] = full & ~(um[a] | um[c] | um[d])
                else:
                    v = ONE << np.uint64(grid[x] - 1)
                    um[a] &= ~v
                    um[c] &= ~v
                    um[d] &= ~v
                    grid[x] = 0
                m = rem[x]
                if m == ZERO:
                    fresh = False
                    x -= 1
                    continue
                nodes += 1
                if budget > 0 and nodes > budget:
                    break
                rng = rng_next(rng)
                v = pick_mask(m, rng)
                rem[x] &= ~v
                grid[x] = ctz(v) + 1
                um[a] |= v
                um[c] |= v
                um[d] |= v
                fresh = True
                x += 1
            if x >= nn:
                for y in range(nn):
                    out[b, y] = grid[y]
                break
            restarts += 1
            if x < 0 or restarts > max_restarts:  # the start cannot be completed (or is hopeless)
                restarts = -1
                break
        out_restarts[b] = restarts


def random_grids(box: Box, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` random full grids uint8[count, NN], every choice drawn from `rng`: a random first row completed
    at random (a start that cannot be completed would be a ValueError)."""
    n = box.n
    starts = np.zeros((count, box.cells), dtype=np.uint8)
    starts[:, :n] = rng.permuted(np.tile(np.arange(1, n + 1, dtype=np.uint8), (count, 1)), axis=1)
    seeds = rng.integers(1, 2**63, size=count, dtype=np.uint64) | ONE
    budget = RESTART_NODES * box.cells
    if n <= ROWWISE_MAX:
        out = np.zeros_like(starts)
        restarts = np.zeros(count, dtype=np.int64)
        if count:
            geo = tables(box)[1]
            _fill_rows_kernel(
                np.int64(n), geo[1], starts, seeds, np.int64(budget), np.int64(MAX_RESTARTS), out, restarts
            )
        ok = restarts >= 0
    else:
        out, counts, *_ = solve_starts(box, starts, seeds, limit=1, budget=budget, restarts=MAX_RESTARTS)
        ok = counts == 1
    if not ok.all():
        raise ValueError(f"start {int(np.flatnonzero(~ok)[0])} cannot be completed to a full grid")
    return out
