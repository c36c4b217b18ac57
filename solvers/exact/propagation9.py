"""The 9x9 (3x3 boxes) kernel of `propagation`: band-wise bitboards per digit, triads, and
branching on a digit's configurations in a band (tdoku's heuristic; docs/decisions.md).

The band idea of ZhouSolve / JCZSolve (written from scratch): for each digit d and band b one 27-bit
word f[9b+d] holds the cells where d is still possible (bit 9*row_in_band + column). Per node, to a
fixpoint: a changed word's 3x3 "row meets box" occupancy is reduced to the union of the permutations
it contains (locked candidates, hidden singles of rows and boxes); a changed digit gets the same filter
per stack (along columns) and hidden singles in columns; naked singles by bit-sliced counts; then
triads (a minirow or minicolumn holds exactly three digits), read from the filtered occupancies kept
per digit (`occ`). Branching: the band (rows or stack) with the fewest open configurations, a digit
with the fewest there; `guesses` counts binary branch points, as tdoku does. Hot code is inlined: a
numba call passing arrays costs reference-count updates, more than the work.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.kernel.band import band_columns_out, band_search, band_singles
from solvers.kernel.bits import ONE, ZERO, ctz

_BAND = np.uint64(0x7FF_FFFF)  # 27 bits: a band of three rows
_ROW = np.uint64(0x1FF)
# Switches to measure a rule's cost against the guesses it saves (docs/decisions.md); compiled
# in as constants, so after flipping one run `make clean-cache`.
TRIADS = True
CONFIG_BRANCH = True  # else branch on a cell with two candidates (else the fewest)

_PERMS = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]  # band row i in box p[i]


def _build_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(shrink, perm27, perm9, permset): shrink[row9] the 3-bit set of boxes a band row touches; for a 3x3
    occupancy s (bit 3*i + j: line i meets segment j) permset[s] the set of `_PERMS` inside it (a digit
    once per line and segment), perm9[s] their union (0: none), perm27[s] the same as a band mask."""
    shrink = np.array([sum(1 << k for k in range(3) if (v >> (3 * k)) & 7) for v in range(512)], np.uint64)
    perm9, perm27, permset = (np.zeros(512, dtype=np.uint64) for _ in range(3))
    for s in range(512):
        for k, p in enumerate(_PERMS):
            places = [3 * i + p[i] for i in range(3)]
            if all((s >> bit) & 1 for bit in places):
                permset[s] |= 1 << k
                for bit in places:
                    perm9[s] |= 1 << bit
                    perm27[s] |= 7 << (9 * (bit // 3) + 3 * (bit % 3))
    return shrink, perm27, perm9, permset


_SHRINK, _PERM27, _PERM9, _PERMSET = _build_tables()  # frozen into the compiled code as constants


def _build_triad_tables() -> tuple[np.ndarray, ...]:
    """(mini27, linebox27, col27, boxother27): a minirow's cells, the rest of its line and box, a
    minicolumn's cells, the rest of its box (the triad rule, see `_triads`)."""
    mini = [7 << (9 * (p // 3) + 3 * (p % 3)) for p in range(9)]
    col = [sum(1 << (9 * i + p) for i in range(3)) for p in range(9)]
    stack = [sum(7 << (9 * i + 3 * t) for i in range(3)) for t in range(3)]
    linebox = [((0x1FF << (9 * (p // 3))) | stack[p % 3]) & ~mini[p] for p in range(9)]
    boxother = [stack[p // 3] & ~col[p] for p in range(9)]
    return tuple(np.array(x, dtype=np.uint64) for x in (mini, linebox, col, boxother))


_MINI27, _LINEBOX27, _COL27, _BOXOTHER27 = _build_triad_tables()
_FULL54 = np.uint64((1 << 54) - 1)


def _build_config_tables() -> tuple[np.ndarray, np.ndarray]:
    """(pcells27, skeep): pcells27[p] = the band cells of permutation p (row i in box p[i]);
    skeep[(6t + p) * 3 + i] = what band i keeps when stack t takes permutation p (band i in
    column 3t + p[i] of the stack)."""
    pcells27 = np.array([sum(7 << (9 * i + 3 * q[i]) for i in range(3)) for q in _PERMS], dtype=np.uint64)
    skeep = np.zeros(3 * 6 * 3, dtype=np.uint64)
    band = (1 << 27) - 1
    for t in range(3):
        stack = sum(7 << (9 * i + 3 * t) for i in range(3))
        for k, q in enumerate(_PERMS):
            for i in range(3):
                col = sum(1 << (9 * r + 3 * t + q[i]) for r in range(3))
                skeep[(6 * t + k) * 3 + i] = (band & ~stack) | col
    return pcells27, skeep


_PCELLS27, _SKEEP = _build_config_tables()
_NCONF = np.array([bin(int(x)).count("1") for x in _PERMSET], dtype=np.int64)
_LINES3 = np.array(
    [sum(0x1FF << (9 * r) for r in range(3) if (k >> r) & 1) for k in range(8)], dtype=np.uint64
)
_BOXES9 = np.array(
    [sum(7 << (3 * t) for t in range(3) if (k >> (3 * t)) & 7) for k in range(512)], dtype=np.uint64
)
_DSPREAD = np.uint64(1 | (1 << 9) | (1 << 18))  # a digit's three words in `todo`
_G3 = np.uint64(sum(1 << (3 * g) for g in range(18)))  # the low bit of each group of three


@njit(cache=True, nogil=True)
def _row_peers(lb):  # type: ignore[no-untyped-def]
    """The other cells of the band row holding the one-bit mask `lb`."""
    if lb <= _ROW:
        return _ROW ^ lb
    if lb <= (_ROW << np.uint64(9)):
        return (_ROW << np.uint64(9)) ^ lb
    return (_ROW << np.uint64(18)) ^ lb


@njit(cache=True, nogil=True)
def _spread(x9):  # type: ignore[no-untyped-def]
    """A 9-bit column set repeated on the three rows of a band."""
    return x9 | (x9 << np.uint64(9)) | (x9 << np.uint64(18))


@njit(cache=True, nogil=True)
def _columns(a):  # type: ignore[no-untyped-def]
    """The 9-bit set of columns where a band word has a bit."""
    return (a | (a >> np.uint64(9)) | (a >> np.uint64(18))) & _ROW


@njit(cache=True, nogil=True)
def _rows3(a):  # type: ignore[no-untyped-def]
    """The 3-bit set of the rows where a band word has a bit."""
    r0 = np.uint64((a & _ROW) != ZERO)
    r1 = np.uint64((a & (_ROW << np.uint64(9))) != ZERO)
    return r0 | (r1 << ONE) | (np.uint64((a >> np.uint64(18)) != ZERO) << np.uint64(2))


@njit(cache=True, nogil=True)
def _twice(a):  # type: ignore[no-untyped-def]
    """The 9-bit set of columns where a band word has two or three bits."""
    r0, r1, r2 = a & _ROW, (a >> np.uint64(9)) & _ROW, a >> np.uint64(18)
    return (r0 & r1) | (r0 & r2) | (r1 & r2)


@njit(cache=True, nogil=True)
def _stack_update(a0, a1, a2, u0, u1, u2):  # type: ignore[no-untyped-def]
    """Column-wise update of one digit's three band words: the (band x column)
    permutation filter of each stack, then hidden singles in columns (the digit is kept
    alone in the band row of a column's only cell). -> (ok, a0, a1, a2)."""
    seven = np.uint64(7)
    c0, c1, c2 = _columns(a0), _columns(a1), _columns(a2)
    k0, k1, k2, vs = ZERO, ZERO, ZERO, ZERO
    for k in range(3):
        sh = np.uint64(3 * k)
        s = ((c0 >> sh) & seven) | (((c1 >> sh) & seven) << np.uint64(3))
        m = _PERM9[s | (((c2 >> sh) & seven) << np.uint64(6))]
        if m == ZERO:
            return False, a0, a1, a2, vs
        vs |= m << np.uint64(9 * k)
        k0 |= (m & seven) << sh
        k1 |= ((m >> np.uint64(3)) & seven) << sh
        k2 |= ((m >> np.uint64(6)) & seven) << sh
    c0, c1, c2 = c0 & k0, c1 & k1, c2 & k2
    a0, a1, a2 = a0 & _spread(k0), a1 & _spread(k1), a2 & _spread(k2)
    many = _twice(a0) | _twice(a1) | _twice(a2) | (c0 & c1) | (c0 & c2) | (c1 & c2)
    one = _spread(_ROW & ~many)  # the columns where the digit has a single cell
    for b in range(3):
        a = a0 if b == 0 else (a1 if b == 1 else a2)
        x = a & one & (u0 if b == 0 else (u1 if b == 1 else u2))
        while x:
            lb = x & (~x + ONE)
            x ^= lb
            a &= ~_row_peers(lb)
        if b == 0:
            a0 = a
        elif b == 1:
            a1 = a
        else:
            a2 = a
    return True, a0, a1, a2, vs


@njit(cache=True, nogil=True)
def _certain(w):  # type: ignore[no-untyped-def]
    """The bits of an occupancy word alone in their group of three: a line of a 3x3
    occupancy with a single place left holds the digit there in every configuration."""
    b0, b1, b2 = w & _G3, (w >> ONE) & _G3, (w >> np.uint64(2)) & _G3
    one = (b0 ^ b1 ^ b2) & ~(b0 & b1 & b2)
    return w & (one | (one << ONE) | (one << np.uint64(2)))


@njit(cache=True, nogil=True)
def _triads(f, occ):  # type: ignore[no-untyped-def]
    """The triad rule: a minirow (minicolumn) holds exactly three digits: three possible ones are certain
    (they leave the rest of its line and box), three certain ones push the others out. `occ` up to date at a
    fixpoint. -> (ok, todo, dd)."""
    p1, p2, p3, p4 = ZERO, ZERO, ZERO, ZERO
    m1, m2, m3, m4 = ZERO, ZERO, ZERO, ZERO
    for d in range(9):
        w = occ[d]
        m = _certain(w)
        p4 |= p3 & w
        p3 |= p2 & w
        p2 |= p1 & w
        p1 |= w
        m4 |= m3 & m
        m3 |= m2 & m
        m2 |= m1 & m
        m1 |= m
    if (_FULL54 & ~p3) != ZERO or m4 != ZERO:
        return False, ZERO, ZERO
    x = p3 & ~p4 & ~m3
    y = m3 & p4
    todo, dd = ZERO, ZERO
    if (x | y) == ZERO:
        return True, todo, dd
    for d in range(9):
        w = occ[d]
        m = _certain(w)
        a = w & x & ~m
        r = w & y & ~m
        if (a | r) == ZERO:
            continue
        while a:  # certain from now on
            bit = ctz(a)
            a &= a - ONE
            if bit < 27:
                f[9 * (bit // 9) + d] &= ~_LINEBOX27[bit % 9]
            else:
                t, i, j = (bit - 27) // 9, ((bit - 27) % 9) // 3, (bit - 27) % 3
                c = 3 * t + j
                for b2 in range(3):
                    f[9 * b2 + d] &= ~(_BOXOTHER27[c] if b2 == i else _COL27[c])
        while r:  # out
            bit = ctz(r)
            r &= r - ONE
            if bit < 27:
                f[9 * (bit // 9) + d] &= ~_MINI27[bit % 9]
            else:
                t, i, j = (bit - 27) // 9, ((bit - 27) % 9) // 3, (bit - 27) % 3
                f[9 * i + d] &= ~_COL27[3 * t + j]
        todo |= _DSPREAD << np.uint64(d)
        dd |= ONE << np.uint64(d)
    return True, todo, dd


@njit(cache=True, nogil=True, inline="always")
def _choose(f, occ, clue):  # type: ignore[no-untyped-def]
    """Where to branch: of the six bands (0-2 rows, 3-5 stacks) the unfixed one with the fewest
    digit configurations, and in it a digit with the fewest (two if any). -> (band, digit,
    configurations as a 6-bit set), band -1 when every band is fixed."""
    best, bb = 1000, -1
    for k in range(6):
        sh = np.uint64(9 * k)
        tot = 0
        for d in range(9):
            tot += _NCONF[(occ[d] >> sh) & _ROW]
        if 9 < tot < best:
            best, bb = tot, k
    if bb < 0:
        return -1, 0, ZERO
    sh = np.uint64(9 * bb)
    bd, bc = 0, 7
    for d in range(9):
        pc = _NCONF[(occ[d] >> sh) & _ROW]
        if 1 < pc < bc:
            bd, bc = d, pc
            if pc == 2:
                break
    return bb, bd, _PERMSET[(occ[bd] >> sh) & _ROW]


@njit(cache=True, nogil=True, inline="always")
def _load(row, f, u, occ, clue):  # type: ignore[no-untyped-def]
    """Place a puzzle's givens at once: each leaves its row, box and column and the other digits its cell.
    -> branch on configurations (`band_search`'s `load`)."""
    for k in range(33):
        clue[k] = ZERO
    for b in range(3):  # without branches (a given or not is unpredictable): slots 0-2 take the blanks
        for p in range(27):
            clue[11 * b + min(np.int64(row[27 * b + p]), 10)] |= ONE << np.uint64(p)
    if (clue[10] | clue[21] | clue[32]) != ZERO:
        clue[1] = _BAND  # a value above 9: report the puzzle unsolvable (digit 1 clashes)
    g0, g1, g2 = ZERO, ZERO, ZERO
    for d in range(9):
        g0 |= clue[d + 1]
        g1 |= clue[d + 12]
        g2 |= clue[d + 23]
    for d in range(9):
        c0, c1, c2 = clue[d + 1], clue[d + 12], clue[d + 23]
        cols = _spread(_columns(c0 | c1 | c2))
        for b in range(3):
            c = c0 if b == 0 else (c1 if b == 1 else c2)
            g = g0 if b == 0 else (g1 if b == 1 else g2)
            gone = _LINES3[_rows3(c)] | _spread(_BOXES9[_columns(c)]) | cols | g
            f[9 * b + d] = _BAND & (~gone | c)
    for k in range(9):
        occ[k] = _FULL54
    u[0], u[1], u[2] = _BAND & ~g0, _BAND & ~g1, _BAND & ~g2
    return CONFIG_BRANCH


@njit(cache=True, nogil=True, inline="always")
def _fixpoint(f, u, pairs, occ, todo, dd, clue):  # type: ignore[no-untyped-def]
    """Propagate the words in `todo` (band updates) and the digits in `dd` (stack updates) to a fixpoint:
    -> False on a contradiction. Inlined: a call passing arrays costs more than the work."""
    nine, eighteen = np.uint64(9), np.uint64(18)
    while True:
        pos = ZERO
        while todo:  # ascending passes: a word flagged behind the pass waits for the next
            ahead = (todo >> pos) << pos
            j = ctz(ahead if ahead else todo)
            pos = np.uint64(j + 1)
            todo &= ~(ONE << np.uint64(j))
            b = j // 9
            d = j - 9 * b
            a = f[j]
            s = _SHRINK[a & _ROW] | (_SHRINK[(a >> nine) & _ROW] << np.uint64(3))
            s |= _SHRINK[a >> eighteen] << np.uint64(6)
            a2 = a & _PERM27[s]
            if a2 == ZERO:
                return False
            dd |= np.uint64(a2 != a) << np.uint64(d)
            f[j] = a2
            sh = np.uint64(9 * b)
            occ[d] = (occ[d] & ~(_ROW << sh)) | (_PERM9[s] << sh)
            r0, r1, r2 = a2 & _ROW, a2 & (_ROW << nine), a2 & (_ROW << eighteen)
            single = ZERO
            if (r0 & (r0 - ONE)) == ZERO:
                single |= r0
            if (r1 & (r1 - ONE)) == ZERO:
                single |= r1
            if (r2 & (r2 - ONE)) == ZERO:
                single |= r2
            new = single & u[b]
            if new == ZERO:
                continue
            u[b] &= ~new  # placed: the cells leave the other digits, the columns the other bands
            base, chm = 9 * b, ZERO  # the band's nine words lie side by side: one vector loop
            for d2 in range(9):  # flags computed without branches: they are unpredictable
                x = f[base + d2]
                y = x & ~new if d2 != d else x
                f[base + d2] = y
                chm |= np.uint64(x != y) << np.uint64(d2)
            todo, dd = todo | (chm << np.uint64(base)), dd | chm
            todo, dd = band_columns_out(f, _spread(_columns(new)), d, b, 3, 1, 9, todo, dd)
        if dd:
            cur = dd
            dd = ZERO
            while cur:
                d = ctz(cur)
                cur &= cur - ONE
                good, x0, x1, x2, vs = _stack_update(f[d], f[d + 9], f[d + 18], u[0], u[1], u[2])
                if not good:
                    return False
                ch = np.uint64(x0 != f[d]) | (np.uint64(x1 != f[d + 9]) << np.uint64(9))
                ch |= np.uint64(x2 != f[d + 18]) << np.uint64(18)
                f[d], f[d + 9], f[d + 18] = x0, x1, x2
                occ[d] = (occ[d] & _BAND) | (vs << np.uint64(27))
                if ch:
                    todo |= ch << np.uint64(d)
                    dd |= ONE << np.uint64(d)
            if todo:
                continue
        ok, found, todo, dd = band_singles(f, u, pairs, 3, 9, 1, 9, _row_peers, todo, dd)
        if not ok:
            return False
        if not found:
            if not TRIADS or (u[0] | u[1] | u[2]) == ZERO:  # singles finished it
                return True
            ok, todo, dd = _triads(f, occ)
            if not ok or (todo == ZERO):
                return ok


@njit(cache=True, nogil=True, inline="always")
def _apply(f, k, d, p, clue):  # type: ignore[no-untyped-def]
    """Keep digit d to configuration p of band k (0-2 rows, 3-5 stacks): -> the words to update."""
    if k < 3:
        f[9 * k + d] &= _PCELLS27[p]
        return ONE << np.uint64(9 * k + d)
    s = 3 * (6 * (k - 3) + p)
    f[d] &= _SKEEP[s]
    f[d + 9] &= _SKEEP[s + 1]
    f[d + 18] &= _SKEEP[s + 2]
    return _DSPREAD << np.uint64(d)


@njit(cache=True, nogil=True)
def kernel9(givens, ask, stop, out):  # type: ignore[no-untyped-def]
    """The 9x9 kernel: the common exact signature (its tables are module constants)."""
    clue = np.empty(33, dtype=np.uint64)  # the givens' cells: slot 11b + v (v 0 blank, 10 above 9)
    shape = (3, 9, 1, 9, 9, 82)  # snapshots of 39 words, depth <= 81
    band_search(givens, ask, stop, out, shape, clue, _load, _fixpoint, _choose, _apply, _row_peers)
