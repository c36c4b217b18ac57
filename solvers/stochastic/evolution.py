"""`evolution`: combinatorial evolution as in the seed article (a hive of organisms).

Every organism is a box-invariant grid (each box holds 1..N, givens fixed) whose error is the number of values
missing from rows and columns. Workers (90%) try one neighbour per epoch (a swap of two free cells in one
box), keep it when better, or with probability `p_worse` even when worse; otherwise they age, and die past
`max_age`, reborn as a random grid. Explorers (10%) draw a fresh random grid every epoch. After each epoch the
best worker and the best explorer are merged box by box into a child that replaces the worst worker. The hive
restarts after `max_epochs`, up to `max_restarts` times (0 = no limit). The defaults are the article's;
`propagate=True` adds singles and candidate-restricted grids and swaps (as the race preset does).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from solvers.kernel.bits import GO_ON
from solvers.kernel.outcome import BUDGET, EXHAUSTED, SOLVED, Outcome
from solvers.model.puzzle import Puzzle
from solvers.stochastic import base, state
from solvers.stochastic.base import Params, StochasticRun, StochasticSolver, register

I_POS = base.I_COMMON  # next organism to move in this epoch
I_EPOCH = base.I_COMMON + 1  # epochs since the last hive (re)start
I_MAX_EPOCHS = base.I_COMMON + 2
I_MAX_RESTARTS = base.I_COMMON + 3
I_MAX_AGE = base.I_COMMON + 4
I_SIZE = base.I_COMMON + 5
WORKER, EXPLORER = 0, 1


class EvolutionParams(Params):
    """Parameters of `evolution` (defaults from the seed article)."""

    propagate: bool = False  # the article searches from the givens alone
    organisms: int = 200
    explorers: float = 0.10  # share of explorers; the rest are workers
    p_worse: float = 0.001  # a worker accepts a worse neighbour with this probability
    max_age: int = 1000  # non-improving moves before a worker dies
    max_epochs: int = 5000  # epochs before the hive restarts
    max_restarts: int = 20  # hive restarts before the run gives up (0 = no limit)
    restrict: bool = True  # with propagate: candidate-matched grids, swaps keep candidates


@nb.njit(cache=True, nogil=True)
def _new_organism(hive: tuple[Any, ...], i: int) -> None:
    """Give organism i a random box-invariant grid (a candidate matching when `cand` restricts anything) and
    its error."""
    fixed, cand, givens, units, grids, counts, err, rng = hive
    if state.restricted(cand, units.shape[1]):
        state.fill_boxes_matched(fixed, cand, units, rng, grids[i])
    else:
        state.fill_units(fixed, units, 2 * units.shape[1], rng, grids[i])
    err[i] = state.recount(grids[i], givens, units, counts[i], state.GIVEN_WEIGHT)


@nb.njit(cache=True, nogil=True)
def hive_init(hive: tuple[Any, ...], age: np.ndarray, best_grid: np.ndarray, istate: np.ndarray) -> None:
    """(Re)start the hive: every organism random, ages 0, epoch 0."""
    grids, err = hive[4], hive[6]
    for i in range(grids.shape[0]):
        _new_organism(hive, i)
        age[i] = 0
        base.note_best(istate, err[i], grids[i], best_grid)
    istate[I_POS] = 0
    istate[I_EPOCH] = 0


@nb.njit(cache=True, nogil=True)
def _mate(hive: tuple[Any, ...], age: np.ndarray, kind: np.ndarray, child: np.ndarray) -> int:
    """Merge the best worker and best explorer box by box into the worst worker's slot; return the child's
    index (-1 when the hive lacks a worker or an explorer)."""
    _, _, givens, units, grids, counts, err, rng = hive
    n = units.shape[1]
    bw = -1
    be = -1
    ww = -1
    for i in range(grids.shape[0]):
        if kind[i] == WORKER:
            if bw < 0 or err[i] < err[bw]:
                bw = i
            if ww < 0 or err[i] > err[ww]:
                ww = i
        elif be < 0 or err[i] < err[be]:
            be = i
    if bw < 0 or be < 0:
        return -1
    for b in range(n):
        src = bw if state.rng_below(rng, 2) == 0 else be
        for k in range(n):
            c = units[2 * n + b, k]
            child[c] = grids[src, c]
    grids[ww, :] = child
    err[ww] = state.recount(grids[ww], givens, units, counts[ww], state.GIVEN_WEIGHT)
    age[ww] = 0
    return ww


@nb.njit(cache=True, nogil=True)
def evolve_slice(args: tuple[Any, ...], work: int, deadline_ns: int, stop: np.ndarray) -> int:
    """Make organism moves (one per organism per epoch) worth `work` units: 1 per worker move, 3N*N/4 per
    fresh grid (explorers, deaths) and per mating; return SOLVED, TIMEOUT, STOPPED, EXHAUSTED or BUDGET."""
    hive, cell_units, gcells, gsize, age, kind, best_grid, istate, p_worse = args
    _, cand, givens, _, grids, counts, err, rng = hive
    if istate[base.I_BEST] == 0:
        return SOLVED
    if gsize.shape[0] == 0:
        return EXHAUSTED
    pop = grids.shape[0]
    child = np.empty(grids.shape[1], dtype=np.uint8)
    grid_work = 1 + 3 * grids.shape[1] // 4
    end = istate[base.I_WORK] + work
    status = BUDGET
    for it in range(work + 1):  # a move costs at least one unit: the work ends the slice first
        status = base.slice_status(it, istate, end, stop, deadline_ns)
        if status != GO_ON:
            break
        istate[base.I_ITER] += 1
        istate[base.I_WORK] += 1
        i = istate[I_POS]
        if kind[i] == EXPLORER:
            _new_organism(hive, i)
            istate[base.I_WORK] += grid_work
        else:
            a, b = state.pick_pair(grids[i], cand, gcells, gsize, rng)
            d = 0
            if a >= 0:
                d = state.swap_delta(grids[i], givens, counts[i], cell_units, a, b, state.GIVEN_WEIGHT)
                if d < 0 or state.rng_unit(rng) < p_worse:
                    state.apply_swap(grids[i], counts[i], cell_units, a, b)
                    err[i] += d
            if d >= 0:
                age[i] += 1
                if age[i] > istate[I_MAX_AGE]:
                    _new_organism(hive, i)
                    istate[base.I_WORK] += grid_work
                    age[i] = 0
        if base.note_best(istate, err[i], grids[i], best_grid):
            istate[base.I_COST] = 0
            return SOLVED
        istate[I_POS] = i + 1
        if i + 1 < pop:
            continue
        istate[I_POS] = 0
        istate[I_EPOCH] += 1
        c = _mate(hive, age, kind, child)
        istate[base.I_WORK] += grid_work
        if c >= 0 and base.note_best(istate, err[c], grids[c], best_grid):
            istate[base.I_COST] = 0
            return SOLVED
        istate[base.I_COST] = err.min()
        if istate[I_EPOCH] >= istate[I_MAX_EPOCHS]:
            if istate[I_MAX_RESTARTS] > 0 and istate[base.I_RESTARTS] >= istate[I_MAX_RESTARTS]:
                return EXHAUSTED
            istate[base.I_RESTARTS] += 1
            hive_init(hive, age, best_grid, istate)
            istate[base.I_WORK] += pop * grid_work
    return status


def start_work(puzzle: Puzzle, params: EvolutionParams) -> int:
    """The work units a run's start-up is counted as: each organism filled and counted."""
    return max(2, params.organisms) * (1 + 3 * puzzle.box.cells // 4)


class EvolutionRun(StochasticRun):
    """One evolution run: the hive's grids, unit counts, errors, ages and kinds."""

    kernel = staticmethod(evolve_slice)

    def __init__(self, puzzle: Puzzle, gen: np.random.Generator, params: EvolutionParams) -> None:
        super().__init__(puzzle, I_SIZE, gen)
        n, nn = puzzle.box.n, puzzle.box.cells
        pop = max(2, params.organisms)
        fixed, cand = state.domains(puzzle, params.propagate)
        if not params.restrict:
            cand[:] = np.uint64((1 << n) - 1)
        gcells, gsize = state.free_groups(fixed, self.units, 2 * n, n)
        self.grids = grids = np.zeros((pop, nn), dtype=np.uint8)
        counts = np.zeros((pop, 3 * n, n + 1), dtype=np.int32)
        self.err = err = np.zeros(pop, dtype=np.int64)
        age = np.zeros(pop, dtype=np.int64)
        explorers = min(pop - 1, max(1, round(pop * params.explorers)))
        kind = np.full(pop, WORKER, dtype=np.int8)
        kind[pop - explorers :] = EXPLORER
        self.istate[base.I_BEST] = np.iinfo(np.int64).max
        self.istate[I_MAX_EPOCHS] = max(1, params.max_epochs)
        self.istate[I_MAX_RESTARTS] = max(0, params.max_restarts)
        self.istate[I_MAX_AGE] = max(1, params.max_age)
        hive = (fixed, cand, self.givens, self.units, grids, counts, err, self.rng)
        hive_init(hive, age, self.best_grid, self.istate)
        self.istate[base.I_WORK] = start_work(puzzle, params)  # the start-up: fill and count
        self.istate[base.I_COST] = err.min()
        if self.istate[base.I_BEST] == 0:
            self.status = Outcome.SOLVED
        self.args = (
            hive,
            self.cell_units,
            gcells,
            gsize,
            age,
            kind,
            self.best_grid,
            self.istate,
            params.p_worse,
        )


register(
    StochasticSolver(
        name="evolution",
        params=EvolutionParams,
        start=EvolutionRun,
        start_work=start_work,
        summary="combinatorial evolution: hive of workers and explorers, box-wise mating, restarts",
    )
)
