"""`propagation` (the default exact solver): constraint propagation plus MRV depth-first search.

Every box shape R x C with N = R*C up to 64 is handled by one generic kernel; 9x9 grids
with 3x3 boxes go to the specialised band-wise kernel of `propagation9` (same contract,
same statuses, same counters, much faster on the 9x9 corpora).

Generic kernel, per search node:

* naked singles: a cell whose candidates (a uint64 mask, bit v-1 for value v) shrink to
  one value is queued; popping it removes the value from its peers;
* hidden singles: a unit (row, column or box) whose cells changed is re-scanned; a value
  with exactly one place in it is placed there; a value with no place is a contradiction;
* locked candidates (pointing and claiming, N >= 12): a value confined inside a box to one
  row (column) segment is removed from the rest of that row (column), and a value confined
  inside a row (column) to one box is removed from the rest of that box;
* then depth-first search on the cell with the fewest candidates (MRV). The search keeps
  an explicit stack of candidate-mask snapshots that grows by reallocation.

`seed` != 0 randomises MRV tie-breaks and the value order through a per-puzzle xorshift64
stream. Counters: `nodes` = search states propagated (the root plus one per value tried),
`guesses` = branching decisions (cells branched on).

The registered `kernel` is a thin Python function choosing between two `@njit` kernels:
numba's on-disk cache only watches a function's own source file, so a compiled kernel
calling into another module could outlive a change of that module. Bit helpers are
repeated per module for the same reason.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from solvers.clock import monotonic_ns
from solvers.exact.base import BUDGET, DONE, LIMIT, STOPPED, TIMEOUT, KernelSolver, register
from solvers.exact.propagation9 import kernel9
from solvers.geometry import geometry
from solvers.puzzle import Box

_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_LOCKED_FROM = 12  # grid side from which locked candidates pay for themselves
_GAC_FROM = 25  # grid side from which all-different consistency pays for itself


@intrinsic
def _popcnt(typingctx, x):  # type: ignore[no-untyped-def]
    """Population count (llvm.ctpop) of an unsigned integer, as int64."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        r = builder.ctpop(args[0])
        return builder.zext(r, ir.IntType(64)) if r.type.width < 64 else r

    return types.int64(x), codegen


@intrinsic
def _ctz(typingctx, x):  # type: ignore[no-untyped-def]
    """Trailing zero count (llvm.cttz) of a non-zero unsigned integer, as int64."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        r = builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
        return builder.zext(r, ir.IntType(64)) if r.type.width < 64 else r

    return types.int64(x), codegen


@njit(cache=True, nogil=True, inline="always")
def _rng_init(seed, index):  # type: ignore[no-untyped-def]
    """A non-zero xorshift64 state for puzzle `index` of a batch run with `seed` (splitmix64)."""
    z = np.uint64(seed) + np.uint64(index + 1) * np.uint64(0x9E37_79B9_7F4A_7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58_476D_1CE4_E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D0_49BB_1331_11EB)
    z = z ^ (z >> np.uint64(31))
    return z if z != _ZERO else np.uint64(0x2545_F491_4F6C_DD1D)


@njit(cache=True, nogil=True, inline="always")
def _rng_next(s):  # type: ignore[no-untyped-def]
    s ^= s << np.uint64(13)
    s ^= s >> np.uint64(7)
    s ^= s << np.uint64(17)
    return s


@njit(cache=True, nogil=True, inline="always")
def _pick(m, r):  # type: ignore[no-untyped-def]
    """Return the (r mod popcount)-th set bit of `m` as a one-bit mask."""
    k = np.int64(r % np.uint64(_popcnt(m)))
    for _ in range(k):
        m &= m - _ONE
    return m & (~m + _ONE)


@njit(cache=True, nogil=True)
def _locked(r, c, cand, rowseg, colseg, elim, ecell):  # type: ignore[no-untyped-def]
    """Pointing and claiming over every box: record the eliminations in `elim` (a mask
    per cell) and `ecell` (the cells concerned); return how many cells."""
    n = r * c
    nbc, nbr = n // c, n // r  # boxes across a row, boxes down a column
    for y in range(n):
        for bx in range(nbc):
            m = _ZERO
            for j in range(y * n + bx * c, y * n + bx * c + c):
                m |= cand[j]
            rowseg[y, bx] = m
    for x in range(n):
        for by in range(nbr):
            m = _ZERO
            for i in range(by * r, by * r + r):
                m |= cand[i * n + x]
            colseg[x, by] = m
    ne = 0
    for by in range(nbr):
        for bx in range(nbc):
            once, twice = _ZERO, _ZERO  # pointing: a value of the box inside one of its rows
            for y in range(by * r, by * r + r):
                twice |= once & rowseg[y, bx]
                once |= rowseg[y, bx]
            for y in range(by * r, by * r + r):
                e = rowseg[y, bx] & ~twice
                if e:
                    out = _ZERO
                    for bx2 in range(nbc):
                        if bx2 != bx:
                            out |= rowseg[y, bx2]
                    e &= out
                if e:
                    for x in range(n):
                        if x // c != bx:
                            xx = y * n + x
                            if cand[xx] & e:  # record: e leaves cell xx
                                if elim[xx] == _ZERO:
                                    ecell[ne] = xx
                                    ne += 1
                                elim[xx] |= e
            once, twice = _ZERO, _ZERO  # ... or inside one of its columns
            for x in range(bx * c, bx * c + c):
                twice |= once & colseg[x, by]
                once |= colseg[x, by]
            for x in range(bx * c, bx * c + c):
                e = colseg[x, by] & ~twice
                if e:
                    out = _ZERO
                    for by2 in range(nbr):
                        if by2 != by:
                            out |= colseg[x, by2]
                    e &= out
                if e:
                    for y in range(n):
                        if y // r != by:
                            xx = y * n + x
                            if cand[xx] & e:  # record: e leaves cell xx
                                if elim[xx] == _ZERO:
                                    ecell[ne] = xx
                                    ne += 1
                                elim[xx] |= e
    for y in range(n):  # claiming: a value of a row inside one box leaves the rest of the box
        once, twice = _ZERO, _ZERO
        for bx in range(nbc):
            twice |= once & rowseg[y, bx]
            once |= rowseg[y, bx]
        by = y // r
        for bx in range(nbc):
            e = rowseg[y, bx] & ~twice
            if e:
                for y2 in range(by * r, by * r + r):
                    if y2 != y and rowseg[y2, bx] & e:
                        for x in range(bx * c, bx * c + c):
                            xx = y2 * n + x
                            if cand[xx] & e:  # record: e leaves cell xx
                                if elim[xx] == _ZERO:
                                    ecell[ne] = xx
                                    ne += 1
                                elim[xx] |= e
    for x in range(n):  # ... and the same for a column
        once, twice = _ZERO, _ZERO
        for by in range(nbr):
            twice |= once & colseg[x, by]
            once |= colseg[x, by]
        bx = x // c
        for by in range(nbr):
            e = colseg[x, by] & ~twice
            if e:
                for x2 in range(bx * c, bx * c + c):
                    if x2 != x and colseg[x2, by] & e:
                        for y in range(by * r, by * r + r):
                            xx = y * n + x2
                            if cand[xx] & e:  # record: e leaves cell xx
                                if elim[xx] == _ZERO:
                                    ecell[ne] = xx
                                    ne += 1
                                elim[xx] |= e
    return ne


@njit(cache=True, nogil=True)
def _alldiff(units, u, n, cand, elim, ecell, ne, wi, wv):  # type: ignore[no-untyped-def]
    """Generalised arc consistency of the all-different constraint of unit `u` (Regin):
    a value stays in a cell only if some perfect matching of the unit's open cells to
    its open values uses that edge, i.e. the cell and the value's matched cell share a
    strongly connected component. Subsumes naked and hidden subsets of every size.

    Records eliminations like `_locked`; returns the new count, or -1 when no perfect
    matching exists (a contradiction)."""
    pos, owner, mate, parent = wi[0], wi[1], wi[2], wi[3]
    dom, reach = wv[0], wv[1]
    p = 0
    for k in range(n):
        m = cand[units[u, k]]
        if m & (m - _ONE):
            pos[p] = units[u, k]
            dom[p] = m
            p += 1
    if p < 3:
        return ne
    for v in range(n):
        owner[v] = -1
    for j in range(p):  # augmenting paths, breadth first over values (bitsets)
        seen = _ZERO
        front = _ONE << np.uint64(j)
        found = -1
        while front and found < 0:
            nxt = _ZERO
            while front and found < 0:
                x = _ctz(front)
                front &= front - _ONE
                vals = dom[x] & ~seen
                seen |= vals
                while vals:
                    v = _ctz(vals)
                    vals &= vals - _ONE
                    parent[v] = x
                    if owner[v] < 0:
                        found = v
                        break
                    nxt |= _ONE << np.uint64(owner[v])
            front = nxt
        if found < 0:
            return -1  # these cells cannot all get distinct values
        v = found
        while True:  # flip the path back to j
            x = parent[v]
            prev = mate[x] if x != j else -1
            owner[v] = x
            mate[x] = v
            if x == j:
                break
            v = prev
    for j in range(p):  # edges of the matched-cell graph, then its transitive closure
        m = dom[j] & ~(_ONE << np.uint64(mate[j]))
        adj = _ZERO
        while m:
            v = _ctz(m)
            m &= m - _ONE
            adj |= _ONE << np.uint64(owner[v])
        reach[j] = adj
    for k in range(p):
        bk = _ONE << np.uint64(k)
        rk = reach[k]
        for j in range(p):
            if reach[j] & bk:
                reach[j] |= rk
    for j in range(p):
        bj = _ONE << np.uint64(j)
        m = dom[j] & ~(_ONE << np.uint64(mate[j]))
        e = _ZERO
        while m:
            v = _ctz(m)
            m &= m - _ONE
            y = owner[v]
            if not (reach[y] & bj and reach[j] & (_ONE << np.uint64(y))):
                e |= _ONE << np.uint64(v)
        if e:
            x = pos[j]
            if elim[x] == _ZERO:
                ecell[ne] = x
                ne += 1
            elim[x] |= e
    return ne


@njit(cache=True, nogil=True)
def _propagate(r, c, units, cell_units, peers, cand, queue, qt, du, rowseg, colseg, elim, ecell, wi, wv, gac):  # type: ignore[no-untyped-def]
    """Run singles (and locked candidates) to a fixpoint from the `qt` queued cells.

    `du` holds the dirty units as three bitsets (rows, columns, boxes: bit i = unit i)
    whose hidden singles must be looked at. Returns False on a contradiction.
    """
    n = r * c
    full = _ALL >> np.uint64(64 - n)
    npeers = peers.shape[1]
    drow, dcol, dbox = du[0], du[1], du[2]
    grow, gcol, gbox = du[3], du[4], du[5]  # units changed since their last all-different check
    n2 = 2 * n
    qh = 0
    while True:
        while qh < qt:  # naked singles: remove each placed value from its peers
            x = queue[qh]
            qh += 1
            v = cand[x]
            for k in range(npeers):
                p = peers[x, k]
                m = cand[p]
                if m & v:
                    m &= ~v
                    cand[p] = m
                    if m == _ZERO:
                        return False
                    if (m & (m - _ONE)) == _ZERO:
                        queue[qt] = p
                        qt += 1
                    drow |= _ONE << np.uint64(cell_units[p, 0])
                    dcol |= _ONE << np.uint64(cell_units[p, 1] - n)
                    dbox |= _ONE << np.uint64(cell_units[p, 2] - n2)
                    grow |= _ONE << np.uint64(cell_units[p, 0])
                    gcol |= _ONE << np.uint64(cell_units[p, 1] - n)
                    gbox |= _ONE << np.uint64(cell_units[p, 2] - n2)
        if drow | dcol | dbox:  # hidden singles in one changed unit
            if drow:
                u = _ctz(drow)
                drow &= drow - _ONE
            elif dcol:
                u = n + _ctz(dcol)
                dcol &= dcol - _ONE
            else:
                u = n2 + _ctz(dbox)
                dbox &= dbox - _ONE
            once, twice, placed = _ZERO, _ZERO, _ZERO
            for k in range(n):
                m = cand[units[u, k]]
                twice |= once & m
                once |= m
                if (m & (m - _ONE)) == _ZERO:
                    placed |= m
            if once != full:
                return False  # a value with no place in the unit
            hs = once & ~twice & ~placed
            if hs:
                for k in range(n):
                    x = units[u, k]
                    h = cand[x] & hs
                    if h:
                        if h & (h - _ONE):
                            return False  # two values with this cell as their only place
                        cand[x] = h
                        queue[qt] = x
                        qt += 1
                        drow |= _ONE << np.uint64(cell_units[x, 0])
                        dcol |= _ONE << np.uint64(cell_units[x, 1] - n)
                        dbox |= _ONE << np.uint64(cell_units[x, 2] - n2)
                        grow |= _ONE << np.uint64(cell_units[x, 0])
                        gcol |= _ONE << np.uint64(cell_units[x, 1] - n)
                        gbox |= _ONE << np.uint64(cell_units[x, 2] - n2)
            continue
        ne = 0
        if n >= _LOCKED_FROM:
            ne = _locked(r, c, cand, rowseg, colseg, elim, ecell)
        if ne == 0 and gac:
            while ne == 0 and (grow | gcol | gbox):
                if grow:
                    u = _ctz(grow)
                    grow &= grow - _ONE
                elif gcol:
                    u = n + _ctz(gcol)
                    gcol &= gcol - _ONE
                else:
                    u = n2 + _ctz(gbox)
                    gbox &= gbox - _ONE
                ne = _alldiff(units, u, n, cand, elim, ecell, ne, wi, wv)
                if ne < 0:
                    return False
        if ne == 0:
            return True
        for k in range(ne):
            x = ecell[k]
            m = cand[x] & ~elim[x]
            elim[x] = _ZERO
            cand[x] = m
            if m == _ZERO:
                for k2 in range(k + 1, ne):
                    elim[ecell[k2]] = _ZERO
                return False
            if (m & (m - _ONE)) == _ZERO:
                queue[qt] = x
                qt += 1
            drow |= _ONE << np.uint64(cell_units[x, 0])
            dcol |= _ONE << np.uint64(cell_units[x, 1] - n)
            dbox |= _ONE << np.uint64(cell_units[x, 2] - n2)
            grow |= _ONE << np.uint64(cell_units[x, 0])
            gcol |= _ONE << np.uint64(cell_units[x, 1] - n)
            gbox |= _ONE << np.uint64(cell_units[x, 2] - n2)


@njit(cache=True, nogil=True)
def _kernel_generic(
    r,
    c,
    units,
    cell_units,
    peers,
    givens,
    limit,
    keep,
    max_nodes,
    time_limit_ns,
    deadline_ns,
    seed,
    stop,
    out_solutions,
    out_counts,
    out_status,
    out_nodes,
    out_guesses,
    out_ns,
):  # type: ignore[no-untyped-def]
    n = r * c
    nn = n * n
    nb = givens.shape[0]
    full = _ALL >> np.uint64(64 - n)
    check = 255 if nn <= 256 else (63 if nn <= 1296 else 15)  # nodes between clock looks (mask)
    cand = np.empty(nn, dtype=np.uint64)
    queue = np.empty(nn, dtype=np.int32)
    du = np.empty(6, dtype=np.uint64)
    wi = np.empty((4, 64), dtype=np.int64)
    wv = np.empty((2, 64), dtype=np.uint64)
    gac = n >= _GAC_FROM
    elim = np.zeros(nn, dtype=np.uint64)
    ecell = np.empty(nn, dtype=np.int32)
    rowseg = np.empty((n, n // c), dtype=np.uint64)
    colseg = np.empty((n, n // r), dtype=np.uint64)
    cap = 16
    stk_cand = np.empty((cap, nn), dtype=np.uint64)
    stk_at = np.empty((cap, 2), dtype=np.int64)  # the branching cell, or unit (-1: a cell branch)
    stk_rem = np.empty((cap, 2), dtype=np.uint64)  # alternatives left, and the unit's value
    for i in range(nb):
        t0 = monotonic_ns()
        end_ns = deadline_ns
        if time_limit_ns > 0 and (end_ns == 0 or t0 + time_limit_ns < end_ns):
            end_ns = t0 + time_limit_ns
        if stop[0] != 0:
            out_status[i:] = STOPPED
            break
        if end_ns != 0 and t0 >= end_ns:
            out_status[i] = TIMEOUT
            out_ns[i] = monotonic_ns() - t0
            continue
        rng = _rng_init(seed, i)
        qt = 0
        for x in range(nn):
            v = np.int64(givens[i, x])
            if v == 0:
                cand[x] = full
            else:
                cand[x] = _ONE << np.uint64(v - 1)
                queue[qt] = x
                qt += 1
        du[:] = full  # every unit once: also finds a value with no place
        count = 0
        nodes = 1
        guesses = 0
        status = DONE
        depth = 0
        ok = _propagate(r, c, units, cell_units, peers, cand, queue, qt, du, rowseg, colseg, elim, ecell, wi, wv, gac)
        while True:
            if ok:
                best = 65  # the cell with the fewest candidates (MRV)
                cell = -1
                ties = 0
                for x in range(nn):
                    m = cand[x]
                    if m & (m - _ONE):
                        pc = _popcnt(m)
                        if pc < best:
                            best = pc
                            cell = x
                            ties = 1
                            if pc == 2 and seed == 0:
                                break
                        elif pc == best and seed != 0:
                            ties += 1
                            rng = _rng_next(rng)
                            if rng % np.uint64(ties) == _ZERO:
                                cell = x
                if cell < 0:  # every cell holds one value: a solution
                    if count < keep:
                        for x in range(nn):
                            out_solutions[i, count, x] = _ctz(cand[x]) + 1
                    count += 1
                    if count >= limit:
                        status = LIMIT
                        break
                    ok = False
                    continue
                if max_nodes > 0 and nodes >= max_nodes:
                    status = BUDGET
                    break
                unit = -1  # ... or a value with fewer places in a unit than that
                val = _ZERO
                if best > 2:
                    ties = 0
                    for u in range(3 * n):
                        g1, g2, g3, g4 = _ZERO, _ZERO, _ZERO, _ZERO
                        for k in range(n):
                            m = cand[units[u, k]]
                            g4 |= g3 & m
                            g3 |= g2 & m
                            g2 |= g1 & m
                            g1 |= m
                        for pc in range(2, min(best, 4)):
                            few = (g2 & ~g3) if pc == 2 else (g3 & ~g4)
                            if few == _ZERO:
                                continue
                            if pc < best:
                                best, unit, val, ties = pc, u, few & (~few + _ONE), 1
                            elif seed != 0:
                                ties += 1
                                rng = _rng_next(rng)
                                if rng % np.uint64(ties) == _ZERO:
                                    unit, val = u, few & (~few + _ONE)
                            break
                        if best == 2 and seed == 0:
                            break
                if depth == cap:  # grow the snapshot stack
                    cap *= 2
                    s2 = np.empty((cap, nn), dtype=np.uint64)
                    s2[:depth] = stk_cand[:depth]
                    stk_cand = s2
                    i2 = np.empty((cap, 2), dtype=np.int64)
                    i2[:depth] = stk_at[:depth]
                    stk_at = i2
                    m2 = np.empty((cap, 2), dtype=np.uint64)
                    m2[:depth] = stk_rem[:depth]
                    stk_rem = m2
                if unit < 0:
                    m = cand[cell]  # the values to try in the cell
                else:
                    m = _ZERO  # the places to try for the value in the unit
                    for k in range(n):
                        if cand[units[unit, k]] & val:
                            m |= _ONE << np.uint64(k)
                for x in range(nn):
                    stk_cand[depth, x] = cand[x]
                stk_at[depth, 0] = cell
                stk_at[depth, 1] = unit
                stk_rem[depth, 1] = val
                depth += 1
                guesses += 1
            else:  # back to the deepest branch with an alternative left to try
                if depth == 0:
                    break
                if max_nodes > 0 and nodes >= max_nodes:
                    status = BUDGET
                    break
                for x in range(nn):
                    cand[x] = stk_cand[depth - 1, x]
                cell = stk_at[depth - 1, 0]
                unit = stk_at[depth - 1, 1]
                val = stk_rem[depth - 1, 1]
                m = stk_rem[depth - 1, 0]
            if seed == 0:
                v = m & (~m + _ONE)
            else:
                rng = _rng_next(rng)
                v = _pick(m, rng)
            stk_rem[depth - 1, 0] = m & ~v
            if m == v:
                depth -= 1  # the last alternative: its snapshot is no longer needed
            if unit >= 0:
                cell = units[unit, _ctz(v)]
                v = val
            nodes += 1
            if (nodes & check) == 0:
                if stop[0] != 0:
                    status = STOPPED
                    break
                if end_ns != 0 and monotonic_ns() >= end_ns:
                    status = TIMEOUT
                    break
            cand[cell] = v
            queue[0] = cell
            du[0] = du[3] = _ONE << np.uint64(cell_units[cell, 0])
            du[1] = du[4] = _ONE << np.uint64(cell_units[cell, 1] - n)
            du[2] = du[5] = _ONE << np.uint64(cell_units[cell, 2] - 2 * n)
            ok = _propagate(r, c, units, cell_units, peers, cand, queue, 1, du, rowseg, colseg, elim, ecell, wi, wv, gac)
        out_counts[i] = count
        out_status[i] = status
        out_nodes[i] = nodes
        out_guesses[i] = guesses
        out_ns[i] = monotonic_ns() - t0
        if status == STOPPED:
            out_status[i + 1 :] = STOPPED
            break


def tables(box: Box) -> tuple[object, ...]:
    """The kernel's tables: box sides, then the units, cell units and peers of `geometry`."""
    geo = geometry(box)
    return (np.int64(box.rows), np.int64(box.cols), geo.units, geo.cell_units, geo.peers)


def kernel(
    r,
    c,
    units,
    cell_units,
    peers,
    givens,
    limit,
    keep,
    max_nodes,
    time_limit_ns,
    deadline_ns,
    seed,
    stop,
    out_solutions,
    out_counts,
    out_status,
    out_nodes,
    out_guesses,
    out_ns,
):  # type: ignore[no-untyped-def]
    """The propagation kernel (common exact signature): 9x9 with 3x3 boxes goes to the
    band-wise kernel, every other shape to the generic one. Both are @njit(nogil)."""
    args = (givens, limit, keep, max_nodes, time_limit_ns, deadline_ns, seed, stop)
    outs = (out_solutions, out_counts, out_status, out_nodes, out_guesses, out_ns)
    if r == 3 and c == 3:
        kernel9(*args, *outs)
    else:
        _kernel_generic(r, c, units, cell_units, peers, *args, *outs)


PROPAGATION = register(
    KernelSolver(
        "propagation",
        kernel,
        tables,
        "constraint propagation (naked/hidden singles, locked candidates) + MRV depth-first search; "
        "band-wise bitboard kernel for 9x9",
    )
)
