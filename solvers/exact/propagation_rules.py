"""The propagation rules of the generic `propagation` kernel: singles, locked candidates (N >= 12),
all-different consistency per unit and per value's row -> column map (fish; N >= 25, one matching
routine `_gac`), and the unit to blame for a contradiction (for the conflict-weighted branching).
Functions taking arrays are called once per node or pass, never per cell (each call costs reference counts).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.kernel.bits import ALL, ONE, ZERO, ctz, popcount

_STEP1, _NONE = np.int64(1), np.int64(0)  # typed, not literals: each literal would compile a variant
LOCKED_FROM = 12  # grid side from which locked candidates pay for themselves
GAC_FROM = 25  # grid side from which all-different consistency pays for itself
FISH_FROM = 25  # grid side from which fish (value-wise row/column matching) pay for themselves

# Compile options chosen for cold compile time, same results and speed (docs/decisions.md): no division
# checks, no unused wrappers, no array reference counting (the arrays come from `workspace`); `_alldiff`
# and `_fish` (one call site each) are inlined into `propagate`, not `_gac` nor `_locked_lines` (two each).
JIT = {
    "cache": True,
    "nogil": True,
    "error_model": "numpy",
    "no_cfunc_wrapper": True,
    "no_rewrites": True,
    "_nrt": False,
}
INTERNAL = {**JIT, "no_cpython_wrapper": True}


@njit(**INTERNAL)
def _eliminate(x, e, elim, ecell, ne):  # type: ignore[no-untyped-def]
    """Record that the values `e` leave cell x (elim[x]; x joins ecell once): -> the new count of ecell."""
    if elim[x] == ZERO:
        ecell[ne] = x
        ne += 1
    elim[x] |= e
    return ne


@njit(**INTERNAL)
def _locked_lines(cand, seg, a, b, ls, ps, changed, elim, ecell, ne):  # type: ignore[no-untyped-def]
    """Pointing and claiming along rows (ls = N, ps = 1) or columns (ls = 1, ps = N), cell (l, p) at
    l*ls + p*ps, a box spanning `a` lines of `b` cells, in the bands holding a `changed` line (a bitset).
    Records eliminations (`_eliminate`); -> the new count of ecell."""
    n = a * b
    nseg = n // b
    lines = ONE << np.uint64(a) if a < 64 else ZERO
    lines -= ONE
    for line in range(n):  # seg[l, s]: the values of line l inside box column s
        if ((changed >> np.uint64(line - line % a)) & lines) == ZERO:
            continue
        once, twice = ZERO, ZERO
        for s in range(nseg):
            m = ZERO
            for p in range(s * b, s * b + b):
                m |= cand[line * ls + p * ps]
            seg[line, s] = m
            twice |= once & m
            once |= m
        seg[line, nseg] = once
        seg[line, nseg + 1] = twice
    for band in range(0, n, a):
        if ((changed >> np.uint64(band)) & lines) == ZERO:
            continue
        for s in range(nseg):
            box_once, box_twice = ZERO, ZERO
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
                            ne = _eliminate(x, e, elim, ecell, ne)
                # claiming: on its line the value lies in this box only: it leaves the box
                e = here & ~twice & box_twice
                if e:
                    for l2 in range(band, band + a):
                        if l2 != line and seg[l2, s] & e:
                            for p in range(s * b, s * b + b):
                                x = l2 * ls + p * ps
                                if cand[x] & e:
                                    ne = _eliminate(x, e, elim, ecell, ne)
    return ne


@njit(**JIT)
def _gac(p, n, wi, wv):  # type: ignore[no-untyped-def]
    """Generalised arc consistency (Regin) of one all-different constraint over the `p` domains in
    wv[0, :p] (bitsets of values 0..n-1): a value stays only if some perfect matching uses it. Writes the
    values to remove into wv[3, :p]; -> how many domains lose values, or -1 when no matching exists."""
    # wi rows: 1 the variable matched to each value (-1: none), 2 the value matched to
    # each variable, 3 BFS parents; wv row 1: the domain of each value's matched variable
    used = ZERO
    for v in range(n):
        wi[1, v] = -1
    for j in range(p):  # greedy matching first
        free = wv[0, j] & ~used
        wi[2, j] = -1
        wv[3, j] = ZERO
        if free:
            v = ctz(free)
            used |= ONE << np.uint64(v)
            wi[1, v] = j
            wi[2, j] = v
    for j in range(p):  # then augmenting paths, breadth first over values (bitsets)
        if wi[2, j] >= 0:
            continue
        seen = ZERO
        front = ONE << np.uint64(j)
        found = -1
        while front and found < 0:
            nxt = ZERO
            while front and found < 0:
                x = ctz(front)
                front &= front - ONE
                vals = wv[0, x] & ~seen
                seen |= vals
                while vals:
                    v = ctz(vals)
                    vals &= vals - ONE
                    wi[3, v] = x
                    if wi[1, v] < 0:
                        found = v
                        break
                    nxt |= ONE << np.uint64(wi[1, v])
            front = nxt
        if found < 0:
            return -1  # these variables cannot all get distinct values
        v = found
        while True:  # flip the path back to j
            x = wi[3, v]
            prev = wi[2, x]
            wi[1, v] = x
            wi[2, x] = v
            if x == j:
                break
            v = prev
    union = ZERO
    for j in range(p):
        union |= wv[0, j]
    if popcount(union) != p:
        return 0  # free values: pruning would need alternating paths from them (callers avoid this)
    # Strongly connected components of the graph "variable j -> the variable matched to a
    # value of j", worked in value space: a variable stands for its matched value, so a
    # set of variables is a bitset of values, and j's edges are its domain (wv[1] holds it
    # per matched value). A value of j goes iff its variable lies in another component.
    # Each component costs a pass over what its root reaches, not the O(p^2) closure.
    for j in range(p):
        wv[1, wi[2, j]] = wv[0, j]
    pruned = 0
    left = union  # the values of the variables not yet in a component
    while left:
        root = left & (~left + ONE)  # lowest set bit
        fwd, new = root, root  # reachable from the root (within `left`: a component lies in it)
        while new:
            v = ctz(new)
            new &= new - ONE
            more = wv[1, v] & left & ~fwd
            fwd |= more
            new |= more
        comp = root  # the reachable ones that reach back: sweeps until nothing joins
        rest = fwd & ~root  # (a path back from a reachable variable stays among the reachable)
        grew = True
        while grew and rest:
            grew = False
            t = rest
            while t:
                b = t & (~t + ONE)
                t &= t - ONE
                if wv[1, ctz(b)] & comp:
                    comp |= b
                    rest &= ~b
                    grew = True
        if comp == union:
            return 0  # one component: nothing to prune (the common case)
        left &= ~comp
        t = comp
        while t:
            v = ctz(t)
            t &= t - ONE
            j = wi[1, v]
            e = wv[0, j] & ~comp
            wv[3, j] = e
            if e:
                pruned += 1
    return pruned


@njit(**JIT, inline="always")
def _alldiff(units, u, n, cand, elim, ecell, ne, wi, wv):  # type: ignore[no-untyped-def]
    """All-different consistency of unit `u` (`_gac` over its open cells): naked and hidden subsets of
    every size. Records eliminations (`_eliminate`); -> the new count of ecell, or -1 on a contradiction."""
    p = 0
    for k in range(n):
        m = cand[units[u, k]]
        if m & (m - ONE):
            wi[0, p] = units[u, k]
            wv[0, p] = m
            p += 1
    if p < 3:
        return ne
    k = _gac(np.int64(p), n, wi, wv)  # typed: a literal p would compile `_gac` twice
    if k <= 0:
        return -1 if k < 0 else ne
    for j in range(p):
        e = wv[3, j]
        if e:
            ne = _eliminate(wi[0, j], e, elim, ecell, ne)
    return ne


@njit(**JIT, inline="always")
def _fish(v, n, cand, elim, ecell, ne, wi, wv):  # type: ignore[no-untyped-def]
    """All-different consistency of value v's row -> column map (each row holds v in one column, each column
    in one row): fish of every size at once. Records eliminations like `_alldiff`; -1 on a contradiction."""
    vb = ONE << np.uint64(v)
    p = 0
    for row in range(n):
        dom = ZERO
        base = row * n
        for k in range(n):
            if cand[base + k] & vb:
                dom |= ONE << np.uint64(k)
        if dom & (dom - ONE):
            wi[0, p] = row
            wv[0, p] = dom
            p += 1
    if p < 4:  # fewer than four open rows: hidden and naked singles and pairs see it all
        return ne
    k = _gac(np.int64(p), n, wi, wv)  # typed: a literal p would compile `_gac` twice
    if k <= 0:
        return -1 if k < 0 else ne
    for j in range(p):
        e = wv[3, j]
        base = wi[0, j] * n
        while e:
            col = ctz(e)
            e &= e - ONE
            ne = _eliminate(base + col, vb, elim, ecell, ne)
    return ne


@njit(**INTERNAL)
def propagate(r, c, units, cell_units, peers, cand, queue, qt, du, seg, elim, ecell, wi, wv):  # type: ignore[no-untyped-def]
    """Propagate to a fixpoint from the `qt` queued cells. `du` holds the units to look
    at as bitsets (bit i = unit i): rows, columns, boxes for hidden singles, then the same
    for all-different checks, then rows and columns for locked candidates; du[8] holds the
    values (bit v-1) whose places changed, for fish. Returns -1 at a fixpoint, else the
    unit blamed for the contradiction found."""
    n = r * c
    n2 = 2 * n
    full = ALL >> np.uint64(64 - n)
    npeers = peers.shape[1]
    drow, dcol, dbox, grow, gcol, gbox = du[0], du[1], du[2], du[3], du[4], du[5]
    lrow, lcol = du[6], du[7]  # lines changed since the last look for locked candidates
    dval = du[8]  # values whose places changed since the last look for fish
    qh = 0
    while True:
        while qh < qt:  # naked singles: remove each placed value from its peers
            x = queue[qh]
            qh += 1
            v = cand[x]
            if v == ZERO:
                return cell_units[x, 0]  # a given that is no value of the grid
            for k in range(npeers):
                p = peers[x, k]
                m = cand[p]
                if m & v:
                    m &= ~v
                    dval |= v
                    cand[p] = m
                    if m == ZERO:  # blame the unit x and p share
                        if cell_units[p, 0] == cell_units[x, 0]:
                            return cell_units[p, 0]
                        return cell_units[p, 1] if cell_units[p, 1] == cell_units[x, 1] else cell_units[p, 2]
                    if (m & (m - ONE)) == ZERO:
                        queue[qt] = p
                        qt += 1
                    drow |= ONE << np.uint64(cell_units[p, 0])
                    dcol |= ONE << np.uint64(cell_units[p, 1] - n)
                    dbox |= ONE << np.uint64(cell_units[p, 2] - n2)
        if drow | dcol | dbox:  # hidden singles in one changed unit
            if drow:
                u = ctz(drow)
                drow &= drow - ONE
                grow |= ONE << np.uint64(u)
                lrow |= ONE << np.uint64(u)
            elif dcol:
                u = n + ctz(dcol)
                dcol &= dcol - ONE
                gcol |= ONE << np.uint64(u - n)
                lcol |= ONE << np.uint64(u - n)
            else:
                u = n2 + ctz(dbox)
                dbox &= dbox - ONE
                gbox |= ONE << np.uint64(u - n2)
            once, twice, placed = ZERO, ZERO, ZERO
            for k in range(n):
                m = cand[units[u, k]]
                twice |= once & m
                once |= m
                if (m & (m - ONE)) == ZERO:
                    placed |= m
            if once != full:
                return u  # a value with no place in the unit
            hs = once & ~twice & ~placed
            if hs:
                for k in range(n):
                    x = units[u, k]
                    h = cand[x] & hs
                    if h:
                        if h & (h - ONE):
                            return u  # two values with this cell as their only place
                        dval |= cand[x] & ~h
                        cand[x] = h
                        queue[qt] = x
                        qt += 1
                        drow |= ONE << np.uint64(cell_units[x, 0])
                        dcol |= ONE << np.uint64(cell_units[x, 1] - n)
                        dbox |= ONE << np.uint64(cell_units[x, 2] - n2)
            continue
        ne = 0
        if n >= LOCKED_FROM:
            ne = _locked_lines(cand, seg, r, c, n, _STEP1, lrow, elim, ecell, _NONE)
            ne = _locked_lines(cand, seg, c, r, _STEP1, n, lcol, elim, ecell, ne)
            lrow, lcol = ZERO, ZERO
        if ne == 0 and n >= GAC_FROM:
            while grow | gcol | gbox:  # one sweep of the changed units
                if grow:
                    u = ctz(grow)
                    grow &= grow - ONE
                elif gcol:
                    u = n + ctz(gcol)
                    gcol &= gcol - ONE
                else:
                    u = n2 + ctz(gbox)
                    gbox &= gbox - ONE
                k = _alldiff(units, u, n, cand, elim, ecell, ne, wi, wv)
                if k < 0:
                    for k2 in range(ne):
                        elim[ecell[k2]] = ZERO
                    return u
                ne = k
        if ne == 0 and n >= FISH_FROM:
            while dval:  # one sweep of the changed values
                v = ctz(dval)
                dval &= dval - ONE
                k = _fish(v, n, cand, elim, ecell, ne, wi, wv)
                if k < 0:
                    for k2 in range(ne):
                        elim[ecell[k2]] = ZERO
                    return v  # blame row v (a value's fish spans every row)
                ne = k
        if ne == 0:
            return -1
        for k in range(ne):  # apply the recorded eliminations
            x = ecell[k]
            m = cand[x] & ~elim[x]
            dval |= cand[x] & elim[x]
            elim[x] = ZERO
            cand[x] = m
            if m == ZERO:
                for k2 in range(k + 1, ne):
                    elim[ecell[k2]] = ZERO
                return cell_units[x, 2]
            if (m & (m - ONE)) == ZERO:
                queue[qt] = x
                qt += 1
            drow |= ONE << np.uint64(cell_units[x, 0])
            dcol |= ONE << np.uint64(cell_units[x, 1] - n)
            dbox |= ONE << np.uint64(cell_units[x, 2] - n2)


@njit(**INTERNAL)
def luby(i):  # type: ignore[no-untyped-def]
    """The i-th term (i >= 1) of the Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, 1, 2, ..."""
    k = 1
    while (1 << k) - 1 < i:
        k += 1
    while i != (1 << k) - 1:
        i -= (1 << (k - 1)) - 1
        k = 1
        while (1 << k) - 1 < i:
            k += 1
    return 1 << (k - 1)
