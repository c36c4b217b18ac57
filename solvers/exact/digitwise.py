"""`digitwise`: the bitmask search that places one value in every row at a time.

The structure of the well-known "optimising a sudoku solver" article: one value goes into
every row, then the next value, and so on. For the current value v and a row r still
missing v, the search chooses a column c where v can go (cell empty, column c has no v
yet, the box of (r, c) has no v yet) and backtracks over those column choices. Rows
where v is given are skipped: the rows each value still needs come from the positions of
the givens, precomputed per puzzle.

Two orderings, both fixed by the puzzle (they keep the digit-by-digit structure):
* values: the value with the most givens first (ties in value order), since it has the
  fewest rows to fill and the fewest choices; this alone is about 8x faster on hard 9x9
  sets than plain 1, 2, ..., N;
* rows, within a value: the row with the fewest candidate columns first.

State, all uint64 bitmasks:
* `occ[r]` / `occc[c]`: the filled cells of row r (column bits) / column c (row bits);
* `colv[v]`: the columns that already hold v;
* `bandv[v, band]`: the columns of the boxes of a band (a row of boxes) that already
  hold v; a placement ORs in the columns of its box, which no other v of that band can
  share, so XOR undoes it exactly; `stackv[v, stack]` is the same for the rows of the
  boxes of a stack (a column of boxes).
The candidates of (v, r) are `full & ~(occ[r] | colv[v] | bandv[v, r // R])`.

Cheap pruning (forward checking) after placing v at (r, c): every row still missing v
keeps a candidate column and together they cover every column still missing v; every
later value missing from row r keeps a column in row r; every later value missing from
column c keeps a row in column c.

Counters: `nodes` = values placed (tried), `guesses` = branching decisions ((value, row)
steps entered with two or more candidate columns).

The bit helpers come from `solvers.kernel.bits`, shared by every kernel; numba's on-disk cache
only watches a function's own source file, so after editing `bits.py` run `make clean-cache`.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from solvers.exact.base import DONE, LIMIT, KernelSolver, register
from solvers.kernel import bits
from solvers.kernel.bits import ALL, ONE, ZERO, popcount
from solvers.kernel.clock import monotonic_ns
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
    rowhas = np.zeros(n, dtype=np.uint64)  # rowhas[r]: values (bit v) already in row r
    grid = np.zeros(nn, dtype=np.uint8)
    step_v = np.zeros(nn, dtype=np.int32)  # the value placed at each step
    step_r = np.zeros(nn, dtype=np.int32)
    left = np.zeros(n, dtype=np.uint64)  # left[v]: the rows still missing v
    order = np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    cand = np.zeros(nn + 1, dtype=np.uint64)  # columns still to try at each step
    placed = np.full(nn + 1, -1, dtype=np.int32)  # the column placed at each step, -1 none
    now = monotonic_ns()  # a puzzle's end is the next one's start
    for i in range(b):
        end_ns, status = bits.start_puzzle(i, now, ask, stop, out)
        if status != bits.GO_ON:  # stopped, or out of time before it began (recorded)
            continue
        rng = bits.rng_init(seed, i)
        occ[:] = 0
        occc[:] = 0
        stackv[:, :] = 0
        colv[:] = 0
        bandv[:, :] = 0
        rowhas[:] = 0
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
            vb = ONE << np.uint64(v - 1)
            band = r // box_rows
            if (colv[v - 1] & bit) or (rowhas[r] & vb) or (bandv[v - 1, band] & boxcols[c // box_cols]):
                ok = False
                break
            occ[r] |= bit
            colv[v - 1] |= bit
            bandv[v - 1, band] |= boxcols[c // box_cols]
            occc[c] |= ONE << np.uint64(r)
            stackv[v - 1, c // box_cols] |= bandrows[band]
            rowhas[r] |= vb
        ns = 0
        if ok:
            # value order: the values with the most givens first (fewest rows to fill)
            for v in range(n):
                order[v] = v
                left[v] = 0
                for r in range(n):
                    if not rowhas[r] & (ONE << np.uint64(v)):
                        left[v] |= ONE << np.uint64(r)
                key[v] = popcount(left[v])
            for a in range(1, n):  # insertion sort by rows left, stable: ties keep value order
                v = order[a]
                j = a - 1
                while j >= 0 and key[order[j]] > key[v]:
                    order[j + 1] = order[j]
                    j -= 1
                order[j + 1] = v
            for a in range(n):
                v = order[a]
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
        count = 0
        nodes = 0
        guesses = 0
        status = DONE
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
                # forward check: the rows of v still to fill must each keep a column, and
                # together cover every column still missing v; every later value missing
                # from row r must keep a column in row r, and every later value missing
                # from column c must keep a row in column c
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
