"""Shared machinery of the stochastic solvers: a seeded RNG, unit counts and the incremental cost, the
box-invariant fill, and singles propagation over the givens.

Why one module: all three solvers move by swapping two cells and score a grid with the cost of
`solvers.model.cost.grid_cost` (one per value missing from a unit, plus a weight per changed given). Keeping
per-unit value counts makes the cost of a swap O(1): only the units holding exactly one of the two cells
change. Every kernel is `@njit(nogil=True)` and draws its random numbers from a splitmix64 stream held in a
uint64[1] array seeded from an explicit `np.random.Generator`, so runs replay exactly and never touch a global
RNG.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from solvers.kernel.bits import ctz
from solvers.model.geometry import geometry
from solvers.model.puzzle import Puzzle

GIVEN_WEIGHT = 8  # the cost of one changed given, as in solvers.model.cost

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S32 = np.uint64(32)
_INV53 = 1.0 / 9007199254740992.0


@nb.njit(cache=True, nogil=True)
def rng_next(rng: np.ndarray) -> np.uint64:
    """Advance the splitmix64 stream in `rng` (uint64[1]) and return 64 random bits."""
    rng[0] += _GOLDEN
    z = rng[0]
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True, nogil=True)
def rng_below(rng: np.ndarray, n: int) -> int:
    """Return a random int in [0, n) for 1 <= n < 2**32 (Lemire's multiply-shift: a 64-bit division costs ~30
    ns per draw on this hardware; bias is below n / 2**32)."""
    return np.int64(((rng_next(rng) >> _S32) * np.uint64(n)) >> _S32)


@nb.njit(cache=True, nogil=True)
def rng_unit(rng: np.ndarray) -> float:
    """Return a random float in [0, 1) with 53 random bits."""
    return np.float64(rng_next(rng) >> np.uint64(11)) * _INV53


def new_rng(gen: np.random.Generator) -> np.ndarray:
    """Seed a kernel RNG stream (uint64[1]) from an explicit numpy Generator."""
    return np.array([gen.integers(0, 2**63, dtype=np.uint64)], dtype=np.uint64)


@nb.njit(cache=True, nogil=True)
def recount(grid: np.ndarray, givens: np.ndarray, units: np.ndarray, counts: np.ndarray, gw: int) -> int:
    """Fill `counts[u, v]` (value v in unit u) from `grid` and return the grid's cost."""
    n = units.shape[1]
    counts[:, :] = 0
    missing = 0
    for u in range(units.shape[0]):
        for k in range(n):
            counts[u, grid[units[u, k]]] += 1
        for v in range(1, n + 1):
            if counts[u, v] == 0:
                missing += 1
    changed = 0
    for c in range(grid.shape[0]):
        if givens[c] != 0 and givens[c] != grid[c]:
            changed += 1
    return missing + gw * changed


@nb.njit(cache=True, nogil=True)
def swap_delta(
    grid: np.ndarray, givens: np.ndarray, counts: np.ndarray, cell_units: np.ndarray, a: int, b: int, gw: int
) -> int:
    """Return the cost change of swapping cells a and b, without changing anything.

    Only the units holding exactly one of the two cells change: in each, the old value leaves (costs 1 if it
    was its only copy) and the other value arrives (saves 1 if it was missing). Givens add `gw` when they
    change and save it when they come back. Branch-free (a unit of one kind can only be shared with the same
    kind of the other cell), because random swaps make every branch here unpredictable."""
    va = np.int64(grid[a])
    vb = np.int64(grid[b])
    d = 0
    for i in range(3):
        ua = cell_units[a, i]
        ub = cell_units[b, i]
        d += np.int64(ua != ub) * (
            np.int64(counts[ua, va] == 1)
            - np.int64(counts[ua, vb] == 0)
            + np.int64(counts[ub, vb] == 1)
            - np.int64(counts[ub, va] == 0)
        )
    ga = np.int64(givens[a])
    gb = np.int64(givens[b])
    d += gw * (
        np.int64(ga != 0) * (np.int64(vb != ga) - np.int64(va != ga))
        + np.int64(gb != 0) * (np.int64(va != gb) - np.int64(vb != gb))
    )
    return d * np.int64(va != vb)


@nb.njit(cache=True, nogil=True)
def apply_swap(grid: np.ndarray, counts: np.ndarray, cell_units: np.ndarray, a: int, b: int) -> None:
    """Swap the values of cells a and b and update the unit counts to match."""
    va = grid[a]
    vb = grid[b]
    for i in range(3):
        ua = cell_units[a, i]
        counts[ua, va] -= 1
        counts[ua, vb] += 1
        ub = cell_units[b, i]
        counts[ub, vb] -= 1
        counts[ub, va] += 1
    grid[a] = vb
    grid[b] = va


@nb.njit(cache=True, nogil=True)
def propagate_singles(
    givens: np.ndarray, units: np.ndarray, peers: np.ndarray, out: np.ndarray, cand: np.ndarray
) -> bool:
    """Write into `out` the givens plus every value forced by naked and hidden singles, and into `cand` each
    cell's remaining candidates (bit v-1 for value v).

    Returns False on a contradiction (a cell without candidates, or a value with no place in a unit). Why:
    every deduced value holds in every solution, so fixing it shrinks the stochastic search space without
    excluding any solution."""
    nn = givens.shape[0]
    n = units.shape[1]
    full = ~np.uint64(0) >> np.uint64(64 - n)  # n = 64 too (a shift by 64 is undefined)
    cand[:] = full
    out[:] = 0
    stack = np.empty(nn, dtype=np.int64)
    top = 0
    for c in range(nn):
        if givens[c] != 0:
            out[c] = givens[c]
            cand[c] = np.uint64(1) << np.uint64(givens[c] - 1)
            stack[top] = c
            top += 1
    while True:
        while top > 0:
            top -= 1
            c = stack[top]
            bit = np.uint64(1) << np.uint64(out[c] - 1)
            for k in range(peers.shape[1]):
                p = peers[c, k]
                if cand[p] & bit:
                    if out[p] == out[c]:
                        return False
                    if out[p] != 0:
                        continue
                    cand[p] &= ~bit
                    m = cand[p]
                    if m == 0:
                        return False
                    if (m & (m - np.uint64(1))) == 0:
                        out[p] = ctz(m) + 1
                        stack[top] = p
                        top += 1
        for u in range(units.shape[0]):
            for v in range(1, n + 1):
                bit = np.uint64(1) << np.uint64(v - 1)
                where = -1
                seen = 0
                placed = False
                for k in range(n):
                    c = units[u, k]
                    if out[c] == v:
                        placed = True
                        break
                    if out[c] == 0 and cand[c] & bit:
                        seen += 1
                        where = c
                if placed:
                    continue
                if seen == 0:
                    return False
                if seen == 1:
                    out[where] = v
                    cand[where] = bit
                    stack[top] = where
                    top += 1
        if top == 0:  # no hidden single either: a fixpoint
            return True


@nb.njit(cache=True, nogil=True, inline="always")
def _unit_gaps(fixed, units, u, grid, have, cells, vals):  # type: ignore[no-untyped-def]
    """Write unit u's fixed cells into `grid`, its free cells into `cells` and the values it misses into
    `vals`, in order: -> (free cells, missing values)."""
    n = units.shape[1]
    have[:] = False
    m = 0
    for k in range(n):
        c = units[u, k]
        grid[c] = fixed[c]
        have[fixed[c]] = True
        if fixed[c] == 0:
            cells[m] = c
            m += 1
    mv = 0
    for v in range(1, n + 1):
        if not have[v]:
            vals[mv] = v
            mv += 1
    return m, mv


@nb.njit(cache=True, nogil=True)
def fill_units(fixed: np.ndarray, units: np.ndarray, first: int, rng: np.ndarray, grid: np.ndarray) -> None:
    """Write into `grid` the fixed cells plus, in each unit `first..first+N-1` (rows: 0, boxes: 2N), its
    missing values in random order, so each of those units holds 1..N once with fixed cells keeping their
    value (the row or box invariant)."""
    n = units.shape[1]
    have = np.zeros(n + 1, dtype=np.bool_)
    cells = np.empty(n, dtype=np.int64)
    vals = np.empty(n, dtype=np.int64)
    for b in range(n):
        m, mv = _unit_gaps(fixed, units, first + b, grid, have, cells, vals)
        for i in range(mv - 1, 0, -1):  # Fisher-Yates
            j = rng_below(rng, i + 1)
            vals[i], vals[j] = vals[j], vals[i]
        for k in range(m):
            grid[cells[k]] = vals[k]


def free_groups(
    fixed: np.ndarray, units: np.ndarray, first: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return (cells int32[G, N], sizes int32[G]) of the unfixed cells of units `first..first+count-1`,
    keeping only units with at least two (a swap needs two)."""
    groups = [free for u in range(first, first + count) if len(free := units[u][fixed[units[u]] == 0]) >= 2]
    out = np.zeros((max(1, len(groups)), units.shape[1]), dtype=np.int32)  # one row at least: numba needs 2-D
    for g, free in enumerate(groups):
        out[g, : len(free)] = free
    return out, np.array([len(free) for free in groups], dtype=np.int32)


def domains(puzzle: Puzzle, propagate: bool) -> tuple[np.ndarray, np.ndarray]:
    """Return (fixed uint8[NN], cand uint64[NN]): the cells held fixed (0 = free) and each cell's allowed
    values. With `propagate`, fixed adds the values forced by singles and cand excludes every value a fixed
    peer holds; without it (or on a contradiction), fixed is the givens and a free cell allows every value."""
    n, nn = puzzle.box.n, puzzle.box.cells
    givens = puzzle.givens.astype(np.uint8)
    full = np.uint64((1 << n) - 1)
    if propagate:
        t = geometry(puzzle.box)
        out = np.zeros(nn, dtype=np.uint8)
        cand = np.zeros(nn, dtype=np.uint64)
        if propagate_singles(givens, t.units, t.peers, out, cand):
            return out, cand
    cand = np.where(givens > 0, np.left_shift(np.uint64(1), givens.astype(np.uint64) - np.uint64(1)), full)
    return givens.copy(), cand.astype(np.uint64)


@nb.njit(cache=True, nogil=True)
def allowed(cand: np.ndarray, cell: int, value: int) -> bool:
    """True when `value` is a candidate of `cell`."""
    return (cand[cell] >> np.uint64(value - 1)) & np.uint64(1) != 0


@nb.njit(cache=True, nogil=True)
def restricted(cand: np.ndarray, n: int) -> bool:
    """True when some cell's candidates exclude a value (so fills should match them)."""
    full = ~np.uint64(0) >> np.uint64(64 - n)  # n = 64 too (a shift by 64 is undefined)
    for c in range(cand.shape[0]):  # noqa: SIM110 (a loop numba compiles)
        if cand[c] != full:
            return True
    return False


@nb.njit(cache=True, nogil=True)
def pick_pair(
    grid: np.ndarray, cand: np.ndarray, gcells: np.ndarray, gsize: np.ndarray, rng: np.ndarray
) -> tuple[int, int]:
    """Draw two distinct free cells of one random swap group whose swap keeps both within their candidates, by
    rejection (a draw costs a few ns); (-1, -1) after 64."""
    for _ in range(64):
        g = rng_below(rng, gsize.shape[0])
        m = gsize[g]
        i = rng_below(rng, m)
        j = rng_below(rng, m - 1)
        j += np.int64(j >= i)
        a = gcells[g, i]
        b = gcells[g, j]
        if allowed(cand, a, grid[b]) and allowed(cand, b, grid[a]):
            return a, b
    return -1, -1


@nb.njit(cache=True, nogil=True)
def fill_boxes_matched(
    fixed: np.ndarray, cand: np.ndarray, units: np.ndarray, rng: np.ndarray, grid: np.ndarray
) -> bool:
    """Fill `grid` under the box invariant with every free cell holding one of its candidates: a random
    perfect matching of each box's missing values to its free cells (Kuhn's augmenting paths over shuffled
    orders). Falls back to a plain random fill of a box, and returns False, when that box has no such
    matching."""
    n = units.shape[1]
    ok = True
    cells = np.empty(n, dtype=np.int64)
    vals = np.empty(n, dtype=np.int64)
    owner = np.empty(n, dtype=np.int64)  # cell slot -> value slot
    seen = np.zeros(n, dtype=np.bool_)
    stack_v = np.empty(n + 1, dtype=np.int64)
    stack_k = np.empty(n + 1, dtype=np.int64)
    have = np.zeros(n + 1, dtype=np.bool_)
    for b in range(n):
        m, _ = _unit_gaps(fixed, units, 2 * n + b, grid, have, cells, vals)
        for i in range(m - 1, 0, -1):
            j = rng_below(rng, i + 1)
            cells[i], cells[j] = cells[j], cells[i]
            j = rng_below(rng, i + 1)
            vals[i], vals[j] = vals[j], vals[i]
        owner[:m] = -1
        matched = 0
        for start in range(m):  # augment from value slot `start` (iterative DFS)
            seen[:m] = False
            top = 0
            stack_v[0] = start
            stack_k[0] = 0
            found = -1
            while top >= 0 and found < 0:
                vs = stack_v[top]
                k = stack_k[top]
                if k >= m:
                    top -= 1
                    continue
                stack_k[top] = k + 1
                if seen[k] or not allowed(cand, cells[k], vals[vs]):
                    continue
                seen[k] = True
                if owner[k] < 0:
                    found = k
                    break
                top += 1
                stack_v[top] = owner[k]
                stack_k[top] = 0
            if found < 0:
                break
            # flip the path: each value on the stack takes the cell its frame last tried
            k = found
            while top >= 0:
                owner[k] = stack_v[top]
                top -= 1
                if top >= 0:
                    k = stack_k[top] - 1
            matched += 1
        if matched < m:
            ok = False
            for k in range(m):
                grid[cells[k]] = vals[k]
            continue
        for k in range(m):
            grid[cells[k]] = vals[owner[k]]
    return ok


def start_grid(
    puzzle: Puzzle, propagate: bool, restrict: bool, first: int, rng: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (fixed, cand, grid) for a unit invariant (`first` = 0 rows, 2N boxes): with `restrict` (boxes
    only) the grid is a candidate matching and cand limits the swaps; otherwise the fill is random and cand
    allows every value (no restriction)."""
    n = puzzle.box.n
    fixed, cand = domains(puzzle, propagate)
    grid = np.zeros(puzzle.box.cells, dtype=np.uint8)
    units = geometry(puzzle.box).units
    if restrict and first == 2 * n:
        fill_boxes_matched(fixed, cand, units, rng, grid)
    else:
        fill_units(fixed, units, first, rng, grid)
        cand[:] = np.uint64((1 << n) - 1)
    return fixed, cand, grid
