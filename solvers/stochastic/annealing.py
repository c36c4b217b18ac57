"""`annealing`: simulated annealing over box-invariant grids, with reheats when stuck.

Each box always holds 1..N with its givens (and singles-forced values) fixed, so only rows and columns can
miss values; a move swaps two free cells of one box and its cost change is read from unit counts (only the two
touched rows and columns change). With `restrict` (default) the start is a matching of each box's missing
values to cells that allow them, and only swaps keeping both cells within their candidates are drawn. The
initial temperature is the spread (standard deviation) of the costs of random neighbours of the initial grid;
the temperature falls by `alpha` after each Markov chain of sum(free cells per box squared) moves, and is
reset to the initial one when `stuck_chains` chains pass without a new lowest cost (a reheat).
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from solvers.kernel.bits import GO_ON
from solvers.kernel.outcome import BUDGET, EXHAUSTED, SOLVED
from solvers.model.puzzle import Puzzle
from solvers.stochastic import base, state
from solvers.stochastic.base import Params, StochasticRun, StochasticSolver, register

I_CHAIN_LEN = base.I_COMMON  # moves per temperature step
I_CHAIN_POS = base.I_COMMON + 1
I_STUCK = base.I_COMMON + 2  # chains since the level last fell
I_STUCK_LIMIT = base.I_COMMON + 3
I_LEVEL = base.I_COMMON + 4  # lowest cost since the last reheat
I_CHAIN_MIN = base.I_COMMON + 5  # lowest cost in the current chain
I_SIZE = base.I_COMMON + 6
F_T, F_T0, F_ALPHA = 0, 1, 2


class AnnealingParams(Params):
    """Parameters of `annealing` (schedule after Lewis 2007, 'Metaheuristics can solve sudoku')."""

    alpha: float = 0.99  # cooling factor per Markov chain
    t0_scale: float = 1.0  # multiplies the calibrated initial temperature
    chain_factor: float = 1.0  # chain length = factor * sum(free cells per box ** 2)
    stuck_chains: int = 150  # chains without a new low before a reheat (tuned on top95)
    samples: int = 200  # neighbours sampled to calibrate the initial temperature
    restrict: bool = True  # start from a candidate matching; only swaps keeping candidates


@nb.njit(cache=True, nogil=True)
def calibrate_t0(args: tuple[Any, ...], samples: int) -> float:
    """Return the standard deviation of the cost change over `samples` random neighbours."""
    grid, cand, counts, givens, cell_units, gcells, gsize, _, rng, _, _ = args
    s = 0.0
    s2 = 0.0
    k = 0
    for _ in range(samples):
        a, b = state.pick_pair(grid, cand, gcells, gsize, rng)
        if a < 0:
            continue
        d = float(state.swap_delta(grid, givens, counts, cell_units, a, b, state.GIVEN_WEIGHT))
        s += d
        s2 += d * d
        k += 1
    if k == 0:
        return 1.0
    mean = s / k
    var = s2 / k - mean * mean
    return math.sqrt(var) if var > 1e-12 else 1.0


@nb.njit(cache=True, nogil=True)
def anneal_slice(args: tuple[Any, ...], work: int, deadline_ns: int, stop: np.ndarray) -> int:
    """Make `work` annealing moves (1 unit each); return SOLVED, TIMEOUT, STOPPED or BUDGET."""
    grid, cand, counts, givens, cell_units, gcells, gsize, best_grid, rng, istate, fstate = args
    if istate[base.I_BEST] == 0:
        return SOLVED
    if gsize.shape[0] == 0:
        return EXHAUSTED
    cost = istate[base.I_COST]
    t = fstate[F_T]
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
        d = state.swap_delta(grid, givens, counts, cell_units, a, b, state.GIVEN_WEIGHT)
        if d <= 0 or state.rng_unit(rng) < math.exp(-d / t):
            state.apply_swap(grid, counts, cell_units, a, b)
            cost += d
            if base.note_best(istate, cost, grid, best_grid):
                status = SOLVED
                break
            if cost < istate[I_CHAIN_MIN]:
                istate[I_CHAIN_MIN] = cost
        istate[I_CHAIN_POS] += 1
        if istate[I_CHAIN_POS] >= istate[I_CHAIN_LEN]:
            istate[I_CHAIN_POS] = 0
            t *= fstate[F_ALPHA]
            if istate[I_CHAIN_MIN] < istate[I_LEVEL]:
                istate[I_LEVEL] = istate[I_CHAIN_MIN]
                istate[I_STUCK] = 0
            else:
                istate[I_STUCK] += 1
                if istate[I_STUCK] >= istate[I_STUCK_LIMIT]:
                    t = fstate[F_T0]
                    istate[I_STUCK] = 0
                    istate[I_LEVEL] = cost
                    istate[base.I_RESTARTS] += 1
            istate[I_CHAIN_MIN] = cost
    istate[base.I_COST] = cost
    fstate[F_T] = t
    return status


class AnnealingRun(StochasticRun):
    """One annealing run: a box-invariant grid, its unit counts and the temperature."""

    kernel = staticmethod(anneal_slice)

    def __init__(self, puzzle: Puzzle, gen: np.random.Generator, params: AnnealingParams) -> None:
        super().__init__(puzzle, I_SIZE, gen)
        n = puzzle.box.n
        fixed, cand, grid = state.start_grid(puzzle, params.propagate, params.restrict, 2 * n, self.rng)
        self.grid = grid  # the current grid, read by tests
        cost = self._counted(grid)
        gcells, gsize = state.free_groups(fixed, self.units, 2 * n, n)
        fstate = np.zeros(3, dtype=np.float64)
        self.args = (
            grid,
            cand,
            self.counts,
            self.givens,
            self.cell_units,
            gcells,
            gsize,
            self.best_grid,
            self.rng,
            self.istate,
            fstate,
        )
        t0 = params.t0_scale * calibrate_t0(self.args, params.samples) if len(gsize) else 1.0
        fstate[:] = (t0, t0, params.alpha)
        chain = int(params.chain_factor * float((gsize.astype(np.int64) ** 2).sum()))
        self.istate[[I_LEVEL, I_CHAIN_MIN]] = cost
        self.istate[I_CHAIN_LEN] = max(1, chain)
        self.istate[I_STUCK_LIMIT] = max(1, params.stuck_chains)


register(
    StochasticSolver(
        name="annealing",
        params=AnnealingParams,
        start=AnnealingRun,
        summary="simulated annealing, box invariant, calibrated temperature, reheats",
    )
)
