"""Numba kernels of the generator: digging to a unique puzzle, random completion, rating.

Why a dedicated kernel rather than `solve_batch(limit=2)` per removal: a 9x9 dig asks ~81 times "does the
puzzle without this given have a solution other than the one it was dug from?", so the question must cost a
few microseconds. It is a satisfiability search, not a count to 2: any second solution of the puzzle minus
cell x differs from the known one at x (every other given is kept), so it looks for a solution with x changed
and stops at the first (trying the known solution's values first elsewhere: the other solution is usually a
small change of it). Empty cells' candidates are one OR of the per-unit "given values" masks the dig keeps (no
peer propagation of the givens), and a given that is a naked or hidden single once removed goes without a
search. An orbit of k cells removed together (symmetric pairs) takes k searches: with x_0..x_{j-1} held at
their values, is there a solution with x_j changed?

A check that exceeds the node budget keeps its given (the puzzle stays proven unique, not proven minimal). One
pass over the orbits in random order gives a minimal puzzle (when no check ran out of budget): a given that
cannot be removed from a puzzle cannot be removed from any puzzle with fewer givens either.

The solver underneath (naked and hidden singles, MRV depth-first search over uint64 candidate masks, N <= 64)
is this module's own, independent of the registered exact solvers so those can check its work. Kernels take
the geometry as one tuple `geo` (`tables`). The bit helpers come from `solvers.kernel.bits` (after editing it:
`make clean-cache`, numba's cache watches one file).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from solvers.kernel.bits import ALL, ONE, ZERO, ctz, pick_value, popcount, rng_next
from solvers.kernel.outcome import BUDGET, DONE, LIMIT
from solvers.model.geometry import geometry
from solvers.model.puzzle import Box


@njit(cache=True, nogil=True)
def _propagate(n, geo, cand, queue, qt, d0, d1, d2):  # type: ignore[no-untyped-def]
    """Naked and hidden singles to a fixpoint from the queued cells and the dirty units (a bit set of three
    words d0..d2: 3N <= 192 units; `unit_bits[x]` holds cell x's three); False on a contradiction."""
    units, _, unit_bits, peers, _ = geo
    full = ALL >> np.uint64(64 - n)
    npeers = peers.shape[1]
    qh = 0
    while True:
        while qh < qt:
            x = queue[qh]
            qh += 1
            v = cand[x]
            for k in range(npeers):
                p = peers[x, k]
                m = cand[p]
                if m & v:
                    m &= ~v
                    cand[p] = m
                    if m == ZERO:
                        return False
                    if (m & (m - ONE)) == ZERO:
                        queue[qt] = p
                        qt += 1
                    d0 |= unit_bits[p, 0]
                    d1 |= unit_bits[p, 1]
                    d2 |= unit_bits[p, 2]
        if d0:
            u = ctz(d0)
            d0 &= d0 - ONE
        elif d1:
            u = 64 + ctz(d1)
            d1 &= d1 - ONE
        elif d2:
            u = 128 + ctz(d2)
            d2 &= d2 - ONE
        else:
            return True
        once, twice, placed = ZERO, ZERO, ZERO
        for k in range(n):
            m = cand[units[u, k]]
            twice |= once & m
            once |= m
            if (m & (m - ONE)) == ZERO:
                placed |= m
        if once != full:
            return False
        hs = once & ~twice & ~placed
        if hs:
            for k in range(n):
                x = units[u, k]
                h = cand[x] & hs
                if h:
                    if h & (h - ONE):
                        return False
                    cand[x] = h
                    queue[qt] = x
                    qt += 1
                    d0 |= unit_bits[x, 0]
                    d1 |= unit_bits[x, 1]
                    d2 |= unit_bits[x, 2]


@njit(cache=True, nogil=True, inline="always")
def _value(m, prefer, rng):  # type: ignore[no-untyped-def]
    """Next value (one-bit mask) to try from `m`: `prefer` first, else random when rng != 0."""
    if m & prefer:
        return prefer, rng
    return pick_value(m, rng != ZERO, rng)


@njit(cache=True, nogil=True)
def _search(n, geo, cand, queue, qt, limit, budget, rng, prefer, out, stk):  # type: ignore[no-untyped-def]
    """Depth-first search for one solution from a state with queued cells and dirty units -> (LIMIT (`limit`
    solutions found) | DONE (search exhausted) | BUDGET (`budget` nodes spent), solutions, nodes, guesses,
    rng, stk). `prefer[x]` (a value, 0 = none) is tried first at x; rng != 0 randomises ties and value order.
    The first solution goes to `out`. `stk` (depth x (NN + 2) words: snapshot, cell, values left) grows."""
    unit_bits = geo[2]
    nn = n * n
    nodes = 1
    guesses = 0
    count = 0
    depth = 0
    every = geo[4]  # a fresh state: every unit is dirty
    ok = _propagate(n, geo, cand, queue, qt, every[0], every[1], every[2])
    while True:
        if ok:
            best = 65
            cell = -1
            ties = 0
            for x in range(nn):
                m = cand[x]
                if m & (m - ONE):
                    pc = popcount(m)
                    if pc < best:
                        best = pc
                        cell = x
                        ties = 1
                        if pc == 2 and rng == ZERO:
                            break
                    elif pc == best and rng != ZERO:
                        ties += 1
                        rng = rng_next(rng)
                        if rng % np.uint64(ties) == ZERO:
                            cell = x
            if cell < 0:
                if count == 0:
                    for x in range(nn):
                        out[x] = ctz(cand[x]) + 1
                count += 1
                if count >= limit:
                    return LIMIT, count, nodes, guesses, rng, stk
                ok = False
                continue
            if budget > 0 and nodes >= budget:
                return BUDGET, count, nodes, guesses, rng, stk
            if depth == stk.shape[0]:
                grown = np.empty((2 * depth, nn + 2), dtype=np.uint64)
                grown[:depth] = stk
                stk = grown
            m = cand[cell]
            av = ZERO if prefer[cell] == 0 else ONE << np.uint64(prefer[cell] - 1)
            v, rng = _value(m, av, rng)
            stk[depth, :nn] = cand
            stk[depth, nn] = np.uint64(cell)
            stk[depth, nn + 1] = m & ~v
            depth += 1
            guesses += 1
        else:
            if depth == 0:
                return DONE, count, nodes, guesses, rng, stk
            if budget > 0 and nodes >= budget:
                return BUDGET, count, nodes, guesses, rng, stk
            top = depth - 1
            cand[:] = stk[top, :nn]
            cell = np.int64(stk[top, nn])
            m = stk[top, nn + 1]
            av = ZERO if prefer[cell] == 0 else ONE << np.uint64(prefer[cell] - 1)
            v, rng = _value(m, av, rng)
            m &= ~v
            stk[top, nn + 1] = m
            if m == ZERO:
                depth -= 1
        nodes += 1
        cand[cell] = v
        queue[0] = cell
        ok = _propagate(n, geo, cand, queue, 1, unit_bits[cell, 0], unit_bits[cell, 1], unit_bits[cell, 2])


@njit(cache=True, nogil=True)
def _solve_kernel(
    n, geo, starts, seeds, limit, budget, restarts, out, out_count, out_status, out_nodes, out_guesses
):  # type: ignore[no-untyped-def]
    """Search every start grid for up to `limit` solutions (the first goes to `out`). seeds[b] != 0 randomises
    tie-breaks and value order (random completion); a search that spends `budget` nodes starts over on the
    continued random stream, up to `restarts` times (so a heavy-tailed search cannot stall a batch)."""
    nn = n * n
    full = ALL >> np.uint64(64 - n)
    cand = np.empty(nn, dtype=np.uint64)
    queue = np.empty(nn + geo[3].shape[1] + 8, dtype=np.int32)
    prefer = np.zeros(nn, dtype=np.uint8)
    stk = np.empty((16, nn + 2), dtype=np.uint64)
    for b in range(starts.shape[0]):
        rng = np.uint64(seeds[b])
        total = 0
        tries = 0
        while True:
            qt = 0
            for x in range(nn):
                v = np.int64(starts[b, x])
                if v == 0:
                    cand[x] = full
                else:
                    cand[x] = ONE << np.uint64(v - 1)
                    queue[qt] = x
                    qt += 1
            res, count, nodes, guesses, rng, stk = _search(
                n, geo, cand, queue, qt, limit, budget, rng, prefer, out[b], stk
            )
            total += nodes
            if res != BUDGET or tries >= restarts:
                break
            tries += 1
        out_count[b] = count
        out_status[b] = res
        out_nodes[b] = total
        out_guesses[b] = guesses


@njit(cache=True, nogil=True)
def _other_solution(n, geo, puzzle, um, sol, orbit, j, budget, ws, stk):  # type: ignore[no-untyped-def]
    """Search a solution of `puzzle` (orbit removed) with orbit[:j] as in `sol` and orbit[j] changed
    -> (LIMIT | DONE | BUDGET, nodes, stk)."""
    units, cu = geo[0], geo[1]
    cand, queue, out = ws
    nn = n * n
    full = ALL >> np.uint64(64 - n)
    xj = orbit[j]
    vj = ONE << np.uint64(sol[xj] - 1)
    if full & ~(um[cu[xj, 0]] | um[cu[xj, 1]] | um[cu[xj, 2]]) & ~vj == ZERO:
        return DONE, 0, stk  # x_j is a naked single once removed: nothing else fits there
    for t in range(3):  # or a hidden single: no other empty cell of one of its units takes v_j
        alone = True
        for k in range(n):
            y = units[cu[xj, t], k]
            if y != xj and puzzle[y] == 0 and (um[cu[y, 0]] | um[cu[y, 1]] | um[cu[y, 2]]) & vj == ZERO:
                alone = False
                break
        if alone:
            return DONE, 0, stk
    qt = 0
    for y in range(nn):
        if puzzle[y] != 0:
            cand[y] = ONE << np.uint64(puzzle[y] - 1)
        else:
            m = full & ~(um[cu[y, 0]] | um[cu[y, 1]] | um[cu[y, 2]])
            if m == ZERO:
                return DONE, 0, stk
            cand[y] = m
            if (m & (m - ONE)) == ZERO:
                queue[qt] = y
                qt += 1
    for i in range(j):  # held at their values: propagate them like singles
        x = orbit[i]
        cand[x] = ONE << np.uint64(sol[x] - 1)
        queue[qt] = x
        qt += 1
    m = cand[xj] & ~vj
    cand[xj] = m
    if (m & (m - ONE)) == ZERO:
        queue[qt] = xj
        qt += 1
    res, _, nodes, _, _, stk = _search(n, geo, cand, queue, qt, 1, budget, ZERO, sol, out, stk)
    return res, nodes, stk


@njit(cache=True, nogil=True)
def _try_orbit(n, geo, puzzle, um, sol, orbit, budget, ws, stk, nodes):  # type: ignore[no-untyped-def]
    """Remove one orbit if the solution stays unique -> (DONE = removed | LIMIT | BUDGET, nodes, stk)."""
    size = 2 if orbit[1] >= 0 else 1
    res = DONE
    for put in (False, True):  # take the orbit's givens out; put them back unless the puzzle stays unique
        for i in range(size):
            x = orbit[i]
            v = ONE << np.uint64(sol[x] - 1)
            for t in range(3):
                um[geo[1][x, t]] = (um[geo[1][x, t]] | v) if put else (um[geo[1][x, t]] & ~v)
            puzzle[x] = sol[x] if put else 0
        for j in range(0 if put else size):
            res, used, stk = _other_solution(n, geo, puzzle, um, sol, orbit, j, budget, ws, stk)
            nodes += used
            if res != DONE:
                break
        if res == DONE:
            break
    return res, nodes, stk


@njit(cache=True, nogil=True)
def _dig_kernel(n, geo, sols, orbits, order, target, budget, retry_budget, out, out_min, out_stop, out_nodes):  # type: ignore[no-untyped-def]
    """Dig each full grid of `sols` in its orbit order (int32[B, K]) to a unique puzzle.

    Stops at `target` clues (0 = dig through), skipping orbits that would overshoot it. Orbits left undecided
    by `budget` get one more look with `retry_budget` at the end (0 = none). out_min: every orbit was checked
    and none can go (minimal); out_stop: the target ended the dig."""
    nn = n * n
    cand = np.empty(nn, dtype=np.uint64)
    queue = np.empty(nn + geo[3].shape[1] + 8, dtype=np.int32)  # held orbit cells may repeat
    ws = (cand, queue, np.empty(nn, dtype=np.uint8))
    um = np.empty(3 * n, dtype=np.uint64)
    stk = np.empty((16, nn + 2), dtype=np.uint64)
    todo = np.empty(orbits.shape[0], dtype=np.int64)
    full = ALL >> np.uint64(64 - n)
    for b in range(sols.shape[0]):
        sol = sols[b]
        puzzle = out[b]
        puzzle[:] = sol
        um[:] = full
        clues = nn
        nodes = 0
        nt = order.shape[1]
        todo[:nt] = order[b]
        skipped = False
        stopped = False
        spend = budget
        for _look in range(2):
            left = nt
            nt = 0
            for t in range(left):
                o = todo[t]
                size = 2 if orbits[o, 1] >= 0 else 1
                if target > 0 and clues - size < target:
                    skipped = True
                    continue
                res, nodes, stk = _try_orbit(n, geo, puzzle, um, sol, orbits[o], spend, ws, stk, nodes)
                if res == DONE:
                    clues -= size
                    if clues == target:
                        stopped = True
                        break
                elif res == BUDGET:
                    todo[nt] = o  # undecided orbits move to the front for the second look
                    nt += 1
            if stopped or nt == 0 or retry_budget == 0:
                break
            spend = retry_budget
        out_min[b] = not (skipped or stopped) and nt == 0
        out_stop[b] = stopped
        out_nodes[b] = nodes


@lru_cache(maxsize=64)
def tables(box: Box) -> tuple[np.int64, tuple[np.ndarray, ...]]:
    """(N, geo) for the kernels: (units, cell units, unit bit sets uint64[NN, 3], peers, all units' bits)."""
    g = geometry(box)
    unit_bits = np.zeros((box.cells, 3), dtype=np.uint64)  # 3N <= 192 units: three words
    u = g.cell_units.astype(np.int64)  # (NN, 3): each cell's row, column and box
    np.bitwise_or.at(
        unit_bits, (np.arange(box.cells)[:, None], u >> 6), np.left_shift(ONE, (u & 63).astype(np.uint64))
    )
    every = np.bitwise_or.reduce(unit_bits, axis=0)
    return np.int64(box.n), (g.units, g.cell_units, unit_bits, g.peers, every)


def solve_starts(
    box: Box, starts: np.ndarray, seeds: np.ndarray | int, *, limit: int, budget: int, restarts: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run `_solve_kernel` on uint8[B, NN] -> (first solutions, counts, outcomes (DONE, LIMIT or BUDGET:
    `solvers.kernel.outcome`), nodes, guesses).

    Random completion: seeds != 0, limit 1, restarts. Rating: seed 0, limit 2, no restart."""
    starts = np.ascontiguousarray(starts, dtype=np.uint8).reshape(-1, box.cells)
    b = starts.shape[0]
    out = np.zeros_like(starts)
    counts, status, nodes, guesses = (np.zeros(b, dtype=np.int64) for _ in range(4))
    if b:
        seeds = np.array(np.broadcast_to(seeds, (b,)), dtype=np.uint64)  # a writeable copy: one signature
        n, geo = tables(box)
        sizes = (np.int64(limit), np.int64(budget), np.int64(restarts))
        _solve_kernel(n, geo, starts, seeds, *sizes, out, counts, status, nodes, guesses)
    return out, counts, status, nodes, guesses


def dig(
    box: Box,
    sols: np.ndarray,
    orbit_table: np.ndarray,
    order: np.ndarray,
    target: int,
    budget: int,
    retry_budget: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Dig full grids uint8[B, NN] in `order` (int32[B, K] rows of `orbit_table`) to unique puzzles ->
    (puzzles, minimal bool[B], stopped-at-target bool[B], nodes); see the module doc."""
    sols = np.ascontiguousarray(sols, dtype=np.uint8).reshape(-1, box.cells)
    b = sols.shape[0]
    out = np.zeros_like(sols)
    minimal, stopped, nodes = np.zeros(b, dtype=bool), np.zeros(b, dtype=bool), np.zeros(b, dtype=np.int64)
    if b:
        n, geo = tables(box)
        table = np.ascontiguousarray(orbit_table, dtype=np.int32)
        order = np.ascontiguousarray(order, dtype=np.int32)
        sizes = (np.int64(target), np.int64(budget), np.int64(retry_budget))
        _dig_kernel(n, geo, sols, table, order, *sizes, out, minimal, stopped, nodes)
    return out, minimal, stopped, nodes
