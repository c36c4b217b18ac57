"""`progressive`: the progressive search of the seed article, made incremental.

A bounded priority queue (`max_size` 20) holds grids keyed by negative cost, so the worst is at the root and a
better neighbour replaces it. From the current grid the search makes `neighbourhood` (50) single-swap
mutations; each is offered to the queue, and the current grid jumps to any mutation within `small_threshold`
of the best cost. After each neighbourhood, `RandomItem()` draws the next current grid from the queue. Cost =
missing values per unit + 8 per changed given, updated in O(1) per swap.

Variants (`variant`): `article` starts from 1..N in every row and swaps two cells of a row, givens included
(they are held only by their cost); `row` and `box` start from the givens and swap two free cells of a row or
a box, so givens always hold.
"""

from __future__ import annotations

from typing import Any, Literal

import numba as nb
import numpy as np

from solvers.kernel.bits import GO_ON
from solvers.kernel.outcome import BUDGET, EXHAUSTED, SOLVED
from solvers.model.puzzle import Puzzle
from solvers.stochastic import base, state
from solvers.stochastic.base import Params, StochasticRun, StochasticSolver, register

I_POOL_N = base.I_COMMON  # grids in the queue
I_NB_POS = base.I_COMMON + 1  # mutations made in the current neighbourhood
I_NB_SIZE = base.I_COMMON + 2
I_SMALL = base.I_COMMON + 3
I_DISTINCT = base.I_COMMON + 4  # 1: never queue a grid equal to a queued one
I_SIZE = base.I_COMMON + 5


class ProgressiveParams(Params):
    """Parameters of `progressive`. The article's own setting is variant="article", neighbourhood=50,
    distinct=False, propagate=False; the defaults are the tuned ones (on 10 top95 puzzles, 2 s each: 2 solved
    with neighbourhood 5000, 0 with 50)."""

    variant: Literal["article", "row", "box"] = "box"
    max_size: int = 20  # queue capacity (the article's MaxSize)
    neighbourhood: int = 5000  # mutations per current grid (the article: 50)
    small_threshold: int = 2  # jump to a mutation whose cost is at most best + this
    distinct: bool = True  # keep the queue free of duplicate grids (the article does not)
    restrict: bool = True  # box variant: candidate-matched start, swaps keep candidates


@nb.njit(cache=True, nogil=True)
def _sift_down(pool: np.ndarray, cost: np.ndarray, size: int, i: int) -> None:
    """Restore the max-heap order on cost below slot i."""
    while True:
        left = 2 * i + 1
        if left >= size:
            return
        big = left
        if left + 1 < size and cost[left + 1] > cost[left]:
            big = left + 1
        if cost[big] <= cost[i]:
            return
        _swap_slots(pool, cost, i, big)
        i = big


@nb.njit(cache=True, nogil=True)
def _swap_slots(pool: np.ndarray, cost: np.ndarray, i: int, j: int) -> None:
    """Swap heap slots i and j: their grids and costs."""
    cost[i], cost[j] = cost[j], cost[i]
    for k in range(pool.shape[1]):
        pool[i, k], pool[j, k] = pool[j, k], pool[i, k]


@nb.njit(cache=True, nogil=True)
def _offer(pool: np.ndarray, pcost: np.ndarray, size: int, grid: np.ndarray, c: int, distinct: bool) -> int:
    """Queue `grid` of cost c if there is room or it beats the worst (the root); return the new size. Why a
    max-heap: the worst grid is the one to evict, in O(log size)."""
    cap = pool.shape[0]
    if size == cap and c >= pcost[0]:
        return size
    if distinct:
        for s in range(size):
            if pcost[s] == c:
                same = True
                for k in range(grid.shape[0]):
                    if pool[s, k] != grid[k]:
                        same = False
                        break
                if same:
                    return size
    if size < cap:
        i = size
        pool[i, :] = grid
        pcost[i] = c
        while i > 0:
            parent = (i - 1) // 2
            if pcost[parent] >= pcost[i]:
                break
            _swap_slots(pool, pcost, i, parent)
            i = parent
        return size + 1
    pool[0, :] = grid
    pcost[0] = c
    _sift_down(pool, pcost, size, 0)
    return size


@nb.njit(cache=True, nogil=True)
def progressive_slice(args: tuple[Any, ...], work: int, deadline_ns: int, stop: np.ndarray) -> int:
    """Make mutations worth `work` units (1 each, plus N*N/16 per queued copy and N*N/4 per RandomItem
    recount); return SOLVED, TIMEOUT, STOPPED or BUDGET."""
    grid, cand, counts, givens, units, cell_units, gcells, gsize, best_grid, pool, pcost, rng, istate = args
    if istate[base.I_BEST] == 0:
        return SOLVED
    if gsize.shape[0] == 0:
        return EXHAUSTED
    cost = istate[base.I_COST]
    size = istate[I_POOL_N]
    small = istate[I_SMALL]
    distinct = istate[I_DISTINCT] != 0
    copy_work = 1 + grid.shape[0] // 16
    end = istate[base.I_WORK] + work
    status = BUDGET
    for it in range(work + 1):  # a move costs at least one unit: the work ends the slice first
        status = base.slice_status(it, istate, end, stop, deadline_ns)
        if status != GO_ON:
            break
        istate[base.I_ITER] += 1
        istate[base.I_WORK] += 1
        a, b = state.pick_pair(grid, cand, gcells, gsize, rng)
        if a < 0:
            continue
        new = cost + state.swap_delta(grid, givens, counts, cell_units, a, b, state.GIVEN_WEIGHT)
        state.apply_swap(grid, counts, cell_units, a, b)  # grid is now the mutation
        if new < istate[base.I_BEST] and base.note_best(istate, new, grid, best_grid):
            cost = new
            status = SOLVED
            break
        if size < pool.shape[0] or new < pcost[0]:
            istate[base.I_WORK] += copy_work
            size = _offer(pool, pcost, size, grid, new, distinct)
        if new <= istate[base.I_BEST] + small:
            cost = new  # jump
        else:
            state.apply_swap(grid, counts, cell_units, a, b)  # back to the current grid
        istate[I_NB_POS] += 1
        if istate[I_NB_POS] >= istate[I_NB_SIZE]:
            istate[I_NB_POS] = 0
            k = state.rng_below(rng, size)  # RandomItem()
            grid[:] = pool[k]
            cost = state.recount(grid, givens, units, counts, state.GIVEN_WEIGHT)
            istate[base.I_WORK] += 4 * copy_work
    istate[base.I_COST] = cost
    istate[I_POOL_N] = size
    return status


class ProgressiveRun(StochasticRun):
    """One progressive-search run: the current grid, its counts and the bounded queue."""

    kernel = staticmethod(progressive_slice)

    def __init__(self, puzzle: Puzzle, gen: np.random.Generator, params: ProgressiveParams) -> None:
        super().__init__(puzzle, I_SIZE, gen)
        n, nn = puzzle.box.n, puzzle.box.cells
        if params.variant == "article":
            grid = np.tile(np.arange(1, n + 1, dtype=np.uint8), n)
            cand = np.full(nn, (1 << n) - 1, dtype=np.uint64)
            gcells, gsize = state.free_groups(np.zeros(nn, dtype=np.uint8), self.units, 0, n)
        else:
            first = 0 if params.variant == "row" else 2 * n
            fixed, cand, grid = state.start_grid(puzzle, params.propagate, params.restrict, first, self.rng)
            gcells, gsize = state.free_groups(fixed, self.units, first, n)
        self.grid = grid  # the current grid, read by tests
        pool = np.zeros((max(1, params.max_size), nn), dtype=np.uint8)
        pcost = np.zeros(max(1, params.max_size), dtype=np.int64)
        pool[0] = grid
        pcost[0] = self._counted(grid)
        self.istate[I_POOL_N] = 1
        self.istate[I_NB_SIZE] = max(1, params.neighbourhood)
        self.istate[I_SMALL] = params.small_threshold
        self.istate[I_DISTINCT] = int(params.distinct)
        self.args = (
            grid,
            cand,
            self.counts,
            self.givens,
            self.units,
            self.cell_units,
            gcells,
            gsize,
            self.best_grid,
            pool,
            pcost,
            self.rng,
            self.istate,
        )


register(
    StochasticSolver(
        name="progressive",
        params=ProgressiveParams,
        start=ProgressiveRun,
        summary="progressive search: bounded queue of grids, neighbourhoods of swaps, jumps near the best",
    )
)
