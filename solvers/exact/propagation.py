"""`propagation` (the default exact solver): constraint propagation plus depth-first search.

Every box shape R x C with N = R*C up to 64 is handled by one generic kernel; 9x9 grids
with 3x3 boxes go to the band-wise kernel of `propagation9` (same contract, statuses and
counters, much faster on 9x9). Generic kernel, per search node, to a fixpoint:

* naked singles: a cell whose candidates (a uint64 mask, bit v-1 for value v) shrink to
  one value is queued; popping it removes the value from its peers;
* hidden singles: a unit (row, column or box) whose cells changed is re-scanned; a value
  with exactly one place in it goes there; a value with no place is a contradiction;
* locked candidates (N >= 12): a value confined inside a box to one row (column) leaves
  the rest of that row (column), and one confined inside a row (column) to one box
  leaves the rest of that box;
* all-different consistency (N >= 25): per unit, a value stays in a cell only if some
  perfect matching of the unit's open cells to its open values uses it (Regin);

then branching, with conflict-weighted MRV (dom/wdeg): the cell with the fewest
candidates per weight of its units, or a value with two or three places in a unit when
that scores better; each contradiction adds 1 to the weight of the unit blamed for it.
With `limit` 1 the search restarts from the root on a geometric node schedule, keeping
the weights (deterministic; the last run is complete, so "no solution" stays a proof).
The search keeps an explicit stack of candidate-mask snapshots grown by reallocation.

`seed` != 0 randomises ties and the order of the alternatives through a per-puzzle
xorshift64 stream. Counters: `nodes` = search states propagated (the root, one per
alternative tried), `guesses` = branching decisions.

The registered `kernel` is a thin Python function choosing between two `@njit` kernels:
numba's on-disk cache only watches a function's own source file, so every function a
kernel compiles in lives in its kernel's file, except the few bit helpers imported from
`propagation9` (frozen: change them only together with this file). Functions taking
arrays are called once per node or per pass, never per cell: each such call costs
reference-count updates.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.clock import monotonic_ns
from solvers.exact.base import BUDGET, DONE, LIMIT, STOPPED, TIMEOUT, KernelSolver, register
from solvers.exact.propagation9 import _ctz, _pick, _popcnt, _rng_init, _rng_next, kernel9
from solvers.geometry import geometry
from solvers.puzzle import Box

_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_LOCKED_FROM = 12  # grid side from which locked candidates pay for themselves
_GAC_FROM = 25  # grid side from which all-different consistency pays for itself
_DUAL_UP_TO = 3  # branch on a value of a unit when it has at most this many places
_RESTART_FIRST = 256  # nodes of the first run before a restart (limit 1); then x1.5


@njit(cache=True, nogil=True)
def _locked_lines(cand, seg, a, b, ls, ps, elim, ecell, ne):  # type: ignore[no-untyped-def]
    """Pointing and claiming along one direction of lines: rows (ls = N, ps = 1) or
    columns (ls = 1, ps = N); a box spans `a` lines and `b` cells of each. Cell (l, p) is
    l*ls + p*ps. Records eliminations in `elim` (a mask per cell) and `ecell` (the cells
    concerned, `ne` of them so far); returns the new count."""
    n = a * b
    nseg = n // b
    for line in range(n):  # seg[l, s]: the values of line l inside box column s
        once, twice = _ZERO, _ZERO
        for s in range(nseg):
            m = _ZERO
            for p in range(s * b, s * b + b):
                m |= cand[line * ls + p * ps]
            seg[line, s] = m
            twice |= once & m
            once |= m
        seg[line, nseg] = once
        seg[line, nseg + 1] = twice
    for band in range(0, n, a):
        for s in range(nseg):
            box_once, box_twice = _ZERO, _ZERO
            for line in range(band, band + a):
                box_twice |= box_once & seg[line, s]
                box_once |= seg[line, s]
            for line in range(band, band + a):
                here, once, twice = seg[line, s], seg[line, nseg], seg[line, nseg + 1]
                # pointing: in its box the value lies on this line only: it leaves the line
                e = here & ~box_twice & once & (twice | ~here)
                if e:
                    for p in range(n):
                        x = line * ls + p * ps
                        if p // b != s and cand[x] & e:
                            if elim[x] == _ZERO:
                                ecell[ne] = x
                                ne += 1
                            elim[x] |= e
                # claiming: on its line the value lies in this box only: it leaves the box
                e = here & ~twice & box_twice
                if e:
                    for l2 in range(band, band + a):
                        if l2 != line and seg[l2, s] & e:
                            for p in range(s * b, s * b + b):
                                x = l2 * ls + p * ps
                                if cand[x] & e:
                                    if elim[x] == _ZERO:
                                        ecell[ne] = x
                                        ne += 1
                                    elim[x] |= e
    return ne


@njit(cache=True, nogil=True)
def _alldiff(units, u, n, cand, elim, ecell, ne, wi, wv):  # type: ignore[no-untyped-def]
    """Generalised arc consistency of the all-different constraint of unit `u` (Regin):
    a value stays in a cell only if some perfect matching of the unit's open cells to
    its open values uses that edge, i.e. the cell and the value's matched cell share a
    strongly connected component. Subsumes naked and hidden subsets of every size.

    Records eliminations like `_locked`; returns the new count, or -1 when no perfect
    matching exists (a contradiction)."""
    # wi rows: 0 the open cells, 1 the cell matched to each value (-1: none), 2 the value
    # matched to each cell, 3 BFS parents; wv rows: 0 the domains, 1 reachability
    p = 0
    for k in range(n):
        m = cand[units[u, k]]
        if m & (m - _ONE):
            wi[0, p] = units[u, k]
            wv[0, p] = m
            p += 1
    if p < 3:
        return ne
    used = _ZERO
    for v in range(n):
        wi[1, v] = -1
    for j in range(p):  # greedy matching first
        free = wv[0, j] & ~used
        wi[2, j] = -1
        if free:
            v = _ctz(free)
            used |= _ONE << np.uint64(v)
            wi[1, v] = j
            wi[2, j] = v
    for j in range(p):  # then augmenting paths, breadth first over values (bitsets)
        if wi[2, j] >= 0:
            continue
        seen = _ZERO
        front = _ONE << np.uint64(j)
        found = -1
        while front and found < 0:
            nxt = _ZERO
            while front and found < 0:
                x = _ctz(front)
                front &= front - _ONE
                vals = wv[0, x] & ~seen
                seen |= vals
                while vals:
                    v = _ctz(vals)
                    vals &= vals - _ONE
                    wi[3, v] = x
                    if wi[1, v] < 0:
                        found = v
                        break
                    nxt |= _ONE << np.uint64(wi[1, v])
            front = nxt
        if found < 0:
            return -1  # these cells cannot all get distinct values
        v = found
        while True:  # flip the path back to j
            x = wi[3, v]
            prev = wi[2, x]
            wi[1, v] = x
            wi[2, x] = v
            if x == j:
                break
            v = prev
    for j in range(p):  # edges of the matched-cell graph, then its transitive closure
        m = wv[0, j] & ~(_ONE << np.uint64(wi[2, j]))
        adj = _ZERO
        while m:
            v = _ctz(m)
            m &= m - _ONE
            adj |= _ONE << np.uint64(wi[1, v])
        wv[1, j] = adj
    for k in range(p):
        bk = _ONE << np.uint64(k)
        rk = wv[1, k]
        for j in range(p):
            if wv[1, j] & bk:
                wv[1, j] |= rk
    for j in range(p):
        bj = _ONE << np.uint64(j)
        m = wv[0, j] & ~(_ONE << np.uint64(wi[2, j]))
        e = _ZERO
        while m:
            v = _ctz(m)
            m &= m - _ONE
            y = wi[1, v]
            if not (wv[1, y] & bj and wv[1, j] & (_ONE << np.uint64(y))):
                e |= _ONE << np.uint64(v)
        if e:
            x = wi[0, j]
            if elim[x] == _ZERO:
                ecell[ne] = x
                ne += 1
            elim[x] |= e
    return ne


@njit(cache=True, nogil=True)
def _propagate(r, c, units, cell_units, peers, cand, queue, qt, du, seg, elim, ecell, wi, wv):  # type: ignore[no-untyped-def]
    """Propagate to a fixpoint from the `qt` queued cells. `du` holds the units to look
    at as bitsets (bit i = unit i): rows, columns, boxes for hidden singles, then the same
    for all-different checks. Returns -1 at a fixpoint, else the unit blamed for the
    contradiction found."""
    n = r * c
    n2 = 2 * n
    full = _ALL >> np.uint64(64 - n)
    npeers = peers.shape[1]
    drow, dcol, dbox, grow, gcol, gbox = du[0], du[1], du[2], du[3], du[4], du[5]
    qh = 0
    while True:
        while qh < qt:  # naked singles: remove each placed value from its peers
            x = queue[qh]
            qh += 1
            v = cand[x]
            if v == _ZERO:
                return cell_units[x, 0]  # a given that is no value of the grid
            for k in range(npeers):
                p = peers[x, k]
                m = cand[p]
                if m & v:
                    m &= ~v
                    cand[p] = m
                    if m == _ZERO:  # blame the unit x and p share
                        if cell_units[p, 0] == cell_units[x, 0]:
                            return cell_units[p, 0]
                        return cell_units[p, 1] if cell_units[p, 1] == cell_units[x, 1] else cell_units[p, 2]
                    if (m & (m - _ONE)) == _ZERO:
                        queue[qt] = p
                        qt += 1
                    drow |= _ONE << np.uint64(cell_units[p, 0])
                    dcol |= _ONE << np.uint64(cell_units[p, 1] - n)
                    dbox |= _ONE << np.uint64(cell_units[p, 2] - n2)
        if drow | dcol | dbox:  # hidden singles in one changed unit
            if drow:
                u = _ctz(drow)
                drow &= drow - _ONE
                grow |= _ONE << np.uint64(u)
            elif dcol:
                u = n + _ctz(dcol)
                dcol &= dcol - _ONE
                gcol |= _ONE << np.uint64(u - n)
            else:
                u = n2 + _ctz(dbox)
                dbox &= dbox - _ONE
                gbox |= _ONE << np.uint64(u - n2)
            once, twice, placed = _ZERO, _ZERO, _ZERO
            for k in range(n):
                m = cand[units[u, k]]
                twice |= once & m
                once |= m
                if (m & (m - _ONE)) == _ZERO:
                    placed |= m
            if once != full:
                return u  # a value with no place in the unit
            hs = once & ~twice & ~placed
            if hs:
                for k in range(n):
                    x = units[u, k]
                    h = cand[x] & hs
                    if h:
                        if h & (h - _ONE):
                            return u  # two values with this cell as their only place
                        cand[x] = h
                        queue[qt] = x
                        qt += 1
                        drow |= _ONE << np.uint64(cell_units[x, 0])
                        dcol |= _ONE << np.uint64(cell_units[x, 1] - n)
                        dbox |= _ONE << np.uint64(cell_units[x, 2] - n2)
            continue
        ne = 0
        if n >= _LOCKED_FROM:
            ne = _locked_lines(cand, seg, r, c, n, 1, elim, ecell, 0)
            ne = _locked_lines(cand, seg, c, r, 1, n, elim, ecell, ne)
        if ne == 0 and n >= _GAC_FROM:
            while grow | gcol | gbox:  # one sweep of the changed units
                if grow:
                    u = _ctz(grow)
                    grow &= grow - _ONE
                elif gcol:
                    u = n + _ctz(gcol)
                    gcol &= gcol - _ONE
                else:
                    u = n2 + _ctz(gbox)
                    gbox &= gbox - _ONE
                k = _alldiff(units, u, n, cand, elim, ecell, ne, wi, wv)
                if k < 0:
                    for k2 in range(ne):
                        elim[ecell[k2]] = _ZERO
                    return u
                ne = k
        if ne == 0:
            return -1
        for k in range(ne):  # apply the recorded eliminations
            x = ecell[k]
            m = cand[x] & ~elim[x]
            elim[x] = _ZERO
            cand[x] = m
            if m == _ZERO:
                for k2 in range(k + 1, ne):
                    elim[ecell[k2]] = _ZERO
                return cell_units[x, 2]
            if (m & (m - _ONE)) == _ZERO:
                queue[qt] = x
                qt += 1
            drow |= _ONE << np.uint64(cell_units[x, 0])
            dcol |= _ONE << np.uint64(cell_units[x, 1] - n)
            dbox |= _ONE << np.uint64(cell_units[x, 2] - n2)


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
    """The generic kernel: the common exact signature after (r, c, units, cell_units, peers)."""
    n = r * c
    nn = n * n
    full = _ALL >> np.uint64(64 - n)
    check = 255 if nn <= 256 else (63 if nn <= 1296 else 15)  # nodes between clock looks (mask)
    cand = np.empty(nn, dtype=np.uint64)
    root = np.empty(nn, dtype=np.uint64)  # the propagated root, for restarts
    queue = np.empty(nn, dtype=np.int32)
    du = np.empty(6, dtype=np.uint64)
    elim = np.zeros(nn, dtype=np.uint64)
    ecell = np.empty(nn, dtype=np.int32)
    seg = np.empty((n, n + 2), dtype=np.uint64)
    wi = np.empty((4, 64), dtype=np.int64)
    wv = np.empty((2, 64), dtype=np.uint64)
    weight = np.empty(3 * n, dtype=np.int64)  # contradictions blamed on each unit, plus 1
    cap = 16
    stk_cand = np.empty((cap, nn), dtype=np.uint64)
    stk_at = np.empty((cap, 2), dtype=np.int64)  # the branching cell, and unit (-1: a cell branch)
    stk_rem = np.empty((cap, 2), dtype=np.uint64)  # the alternatives left, and the unit's value
    for i in range(givens.shape[0]):
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
        weight[:] = 1
        qt = 0
        for x in range(nn):
            v = np.int64(givens[i, x])
            cand[x] = full if v == 0 else (_ONE << np.uint64(v - 1) if v <= n else _ZERO)
            if v != 0:
                queue[qt] = x
                qt += 1
        du[:] = full  # every unit once: also finds a value with no place
        count, nodes, guesses, depth, status = 0, 1, 0, 0, DONE
        ok = _propagate(r, c, units, cell_units, peers, cand, queue, qt, du, seg, elim, ecell, wi, wv) < 0
        root[:] = cand
        run_start, cutoff = 1, _RESTART_FIRST
        while True:
            if limit == 1 and depth > 0 and nodes - run_start >= cutoff:  # restart, keeping the weights
                cand[:] = root
                ok, depth, run_start, cutoff = True, 0, nodes, cutoff + cutoff // 2
            if ok:  # the cell with the fewest candidates per weight of its units
                best, bw, cell, unit, val, ties = 65, 1, -1, -1, _ZERO, 0
                for x in range(nn):
                    m = cand[x]
                    if m & (m - _ONE):
                        pc = _popcnt(m)
                        w = weight[cell_units[x, 0]] + weight[cell_units[x, 1]] + weight[cell_units[x, 2]]
                        if pc * bw < best * w:
                            best, bw, cell, ties = pc, w, x, 1
                        elif pc * bw == best * w and seed != 0:
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
                for u in range(3 * n if best > 2 or bw > 3 else 0):  # ... or a value of a unit
                    g1, g2, g3, g4 = _ZERO, _ZERO, _ZERO, _ZERO
                    for k in range(n):
                        m = cand[units[u, k]]
                        g4 |= g3 & m
                        g3 |= g2 & m
                        g2 |= g1 & m
                        g1 |= m
                    w = 3 * weight[u]
                    for pc in range(2, _DUAL_UP_TO + 1):
                        few = (g2 & ~g3) if pc == 2 else (g3 & ~g4)  # values with pc places
                        if few == _ZERO:
                            continue
                        if pc * bw < best * w:
                            best, bw, unit, val, ties = pc, w, u, few & (~few + _ONE), 1
                        elif pc * bw == best * w and seed != 0:
                            ties += 1
                            rng = _rng_next(rng)
                            if rng % np.uint64(ties) == _ZERO:
                                unit, val = u, few & (~few + _ONE)
                        break
                if depth == cap:  # grow the snapshot stack
                    cap *= 2
                    s2 = np.empty((cap, nn), dtype=np.uint64)
                    s2[:depth] = stk_cand[:depth]
                    a2 = np.empty((cap, 2), dtype=np.int64)
                    a2[:depth] = stk_at[:depth]
                    r2 = np.empty((cap, 2), dtype=np.uint64)
                    r2[:depth] = stk_rem[:depth]
                    stk_cand, stk_at, stk_rem = s2, a2, r2
                m = cand[cell]  # the values to try in the cell, or the places of the unit's value
                if unit >= 0:
                    m = _ZERO
                    for k in range(n):
                        if cand[units[unit, k]] & val:
                            m |= _ONE << np.uint64(k)
                for x in range(nn):
                    stk_cand[depth, x] = cand[x]
                stk_at[depth, 0], stk_at[depth, 1], stk_rem[depth, 1] = cell, unit, val
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
                cell, unit, val = stk_at[depth - 1, 0], stk_at[depth - 1, 1], stk_rem[depth - 1, 1]
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
                cell, v = units[unit, _ctz(v)], val
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
            blame = _propagate(r, c, units, cell_units, peers, cand, queue, 1, du, seg, elim, ecell, wi, wv)
            ok = blame < 0
            if not ok:
                weight[blame] += 1
        out_counts[i] = count
        out_status[i] = status
        out_nodes[i] = nodes
        out_guesses[i] = guesses
        out_ns[i] = monotonic_ns() - t0
        if status == STOPPED:
            out_status[i + 1 :] = STOPPED
            break


def tables(box: Box) -> tuple[object, ...]:
    """The kernel's tables: the box sides, then the units, cell units and peers of `geometry`."""
    geo = geometry(box)
    return (np.int64(box.rows), np.int64(box.cols), geo.units, geo.cell_units, geo.peers)


def kernel(r, c, units, cell_units, peers, *args):  # type: ignore[no-untyped-def]
    """The propagation kernel (common exact signature after `tables(box)`): 9x9 grids with
    3x3 boxes go to the band kernel, every other shape to the generic one (both @njit)."""
    if r == 3 and c == 3:
        kernel9(*args)
    else:
        _kernel_generic(r, c, units, cell_units, peers, *args)


PROPAGATION = register(
    KernelSolver(
        "propagation",
        kernel,
        tables,
        "singles, locked candidates (and all-different consistency from 25x25) + conflict-weighted "
        "MRV depth-first search; band-wise bitboard kernel for 9x9",
    )
)
