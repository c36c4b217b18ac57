"""`digitwise`: the bitmask search that places one value in every row at a time.

The structure of the "optimising a sudoku solver" article: value v goes into each row still missing
it (a column where v fits: cell empty, column and box without v), then the next value. Values with
the most givens first (fewest rows to fill: about 8x faster on hard 9x9 sets than 1, 2, ..., N), and
within a value the row with the fewest candidate columns first. State as uint64 masks: `occ[r]` /
`occc[c]` the filled cells of row r / column c, `colv[v]` the columns holding v, `bandv[v, band]` /
`stackv[v, stack]` the columns (rows) of a band's (stack's) boxes holding v (XOR undoes a placement).
Forward checking after placing v at (r, c): every row missing v keeps a column and together they cover
every column missing v; every later value missing from row r (column c) keeps a place there.
Counters: `nodes` = values placed, `guesses` = (value, row) steps with two or more columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from solvers.exact.base import KernelSolver, register
from solvers.kernel import bits
from solvers.kernel.bits import ALL, ONE, ZERO, popcount
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import DONE, LIMIT
from solvers.model.puzzle import Box


@njit(cache=True, nogil=True)
def _dw_kernel(n, box_rows, box_cols, givens, ask, stop, out):  # type: ignore[no-untyped-def]
    limit, keep, max_nodes, _, _, seed = ask
    out_solutions, _, _, _, _, _ = out
    b = givens.shape[0]
    nn = n * n
    full = ALL >> np.uint64(64 - n)
    bands = n // box_rows
    # boxcols[j]: the columns of box column j (the boxes of a band are box_cols wide)
    nstacks = n // box_cols
    boxcols = np.zeros(nstacks, dtype=np.uint64)
    for c in range(n):
        boxcols[c // box_cols] |= ONE << np.uint64(c)
    occ = np.zeros(n, dtype=np.uint64)
    colv = np.zeros(n, dtype=np.uint64)
    bandv = np.zeros((n, bands), dtype=np.uint64)
    occc = np.zeros(n, dtype=np.uint64)  # occc[c]: the filled cells of column c (row bits)
    stackv = np.zeros((n, nstacks), dtype=np.uint64)  # rows of a stack's boxes holding v
    bandrows = np.zeros(bands, dtype=np.uint64)
    for r in range(n):
        bandrows[r // box_rows] |= ONE << np.uint64(r)
    grid = np.zeros(nn, dtype=np.uint8)
    step_v = np.zeros(nn, dtype=np.int32)  # the value placed at each step
    step_r = np.zeros(nn, dtype=np.int32)
    left = np.zeros(n, dtype=np.uint64)  # left[v]: the rows still missing v
    key = np.zeros(n, dtype=np.int64)
    cand = np.zeros(nn + 1, dtype=np.uint64)  # columns still to try at each step
    placed = np.full(nn + 1, -1, dtype=np.int32)  # the column placed at each step, -1 none
    now = monotonic_ns()  # a puzzle's end is the next one's start
    for i in range(b):
        end_ns, status = bits.start_puzzle(i, now, ask, stop, out)
        if status != bits.GO_ON:  # stopped, or out of time before it began (recorded)
            continue
        rng = bits.rng_init(seed, i)
        for a in (occ, occc, colv):
            a[:] = 0
        left[:] = full
        stackv[:, :] = 0
        bandv[:, :] = 0
        ok = True
        for cell in range(nn):
            v = np.int64(givens[i, cell])
            grid[cell] = v
            if v == 0:
                continue
            if v > n:
                ok = False
                break
            r = cell // n
            c = cell % n
            bit = ONE << np.uint64(c)
            rb = ONE << np.uint64(r)
            band = r // box_rows
            if (colv[v - 1] & bit) or not (left[v - 1] & rb) or (bandv[v - 1, band] & boxcols[c // box_cols]):
                ok = False
                break
            occ[r] |= bit
            colv[v - 1] |= bit
            bandv[v - 1, band] |= boxcols[c // box_cols]
            occc[c] |= rb
            stackv[v - 1, c // box_cols] |= bandrows[band]
            left[v - 1] ^= rb
        ns = 0
        if ok:
            # value order: the values with the most givens first (fewest rows to fill)
            for v in range(n):
                key[v] = popcount(left[v])
            for v in np.argsort(key, kind="mergesort"):  # stable: ties keep value order
                for _ in range(key[v]):
                    step_v[ns] = v
                    ns += 1
            # every (value, row) step must start with a candidate column
            for v in range(n):
                m = left[v]
                while m:
                    r = np.int64(trailing_zeros(m))
                    m &= m - ONE
                    if (full & ~(occ[r] | colv[v] | bandv[v, r // box_rows])) == ZERO:
                        ok = False
        count, nodes, guesses, status = 0, 0, 0, DONE
        if ok and ns == 0:
            count = 1
            out_solutions[i, 0, :] = grid
            status = LIMIT if limit <= 1 else DONE
        elif ok:
            d = 0
            entering = True
            while True:
                v = step_v[d]
                if entering:  # a new step: the row of v with the fewest columns left
                    entering = False
                    best = n + 1
                    r = 0
                    m = left[v]
                    while m:
                        r2 = np.int64(trailing_zeros(m))
                        m &= m - ONE
                        k = popcount(full & ~(occ[r2] | colv[v] | bandv[v, r2 // box_rows]))
                        if k < best:
                            best = k
                            r = r2
                    step_r[d] = r
                    left[v] ^= ONE << np.uint64(r)
                    cand[d] = full & ~(occ[r] | colv[v] | bandv[v, r // box_rows])
                    if cand[d] & (cand[d] - ONE):  # two or more columns: a branching decision
                        guesses += 1
                    placed[d] = -1
                r = step_r[d]
                band = r // box_rows
                c = placed[d]
                if c >= 0:  # undo the column tried last at this step
                    bit = ONE << np.uint64(c)
                    occ[r] ^= bit
                    colv[v] ^= bit
                    bandv[v, band] ^= boxcols[c // box_cols]
                    occc[c] ^= ONE << np.uint64(r)
                    stackv[v, c // box_cols] ^= bandrows[band]
                    grid[r * n + c] = 0
                    placed[d] = -1
                m = cand[d]
                if m == ZERO:  # every column tried: back to the previous step
                    left[v] |= ONE << np.uint64(r)
                    if d == 0:
                        break
                    d -= 1
                    continue
                nodes, halt = bits.count_node(nodes, max_nodes, stop, end_ns)
                if halt != bits.GO_ON:
                    status = halt
                    break
                c, rng = bits.pick_bit(m, seed, rng)
                bit = ONE << np.uint64(c)
                cand[d] = m ^ bit
                occ[r] |= bit
                colv[v] |= bit
                bandv[v, band] |= boxcols[c // box_cols]
                occc[c] |= ONE << np.uint64(r)
                stackv[v, c // box_cols] |= bandrows[band]
                grid[r * n + c] = v + 1
                placed[d] = c
                if d + 1 == ns:  # every value in every row: a solution
                    if count < keep:
                        out_solutions[i, count, :] = grid
                    count += 1
                    if count >= limit:
                        status = LIMIT
                        break
                    continue  # the next pass undoes this column and tries the next one
                # forward check (see the module docstring): rows of v, then row r and column c
                dead = False
                cover = colv[v]
                m = left[v]
                while m:
                    r2 = np.int64(trailing_zeros(m))
                    m &= m - ONE
                    cc = full & ~(occ[r2] | colv[v] | bandv[v, r2 // box_rows])
                    if cc == ZERO:
                        dead = True
                        break
                    cover |= cc
                if not dead and cover != full:
                    dead = True
                if not dead:
                    free = full & ~occ[r]
                    freec = full & ~occc[c]
                    stack = c // box_cols
                    for w in range(n):
                        lw = left[w]
                        if lw == ZERO:  # a value already in every row
                            continue
                        row_lost = ((lw >> np.uint64(r)) & ONE) != ZERO and (
                            free & ~(colv[w] | bandv[w, band])
                        ) == ZERO
                        col_open = ((colv[w] >> np.uint64(c)) & ONE) == ZERO
                        if row_lost or (col_open and (freec & lw & ~stackv[w, stack]) == ZERO):
                            dead = True
                            break
                if dead:
                    continue  # undo at the top of the loop, try the next column
                d += 1
                entering = True
        now = bits.record_puzzle(i, count, status, nodes, guesses, now, out)
        if now < 0:
            break


def _tables(box: Box) -> tuple[object, ...]:
    return (np.int64(box.n), np.int64(box.rows), np.int64(box.cols))


register(
    KernelSolver(
        "digitwise",
        _dw_kernel,
        _tables,
        "bitmask search placing one value in every row at a time (value 1 everywhere, then 2, ...)",
    )
)
