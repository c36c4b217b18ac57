"""The 9x9 (3x3 boxes) kernel of `propagation`: band-wise bitboards per digit.

Same contract, statuses and counters as the generic kernel of `propagation`, which
dispatches here. The representation follows the band idea of ZhouSolve / JCZSolve
(written from scratch here): for each digit d and band b (three rows of boxes) one
27-bit word f[3d+b] holds the cells of the band where d is still possible (bit
9*row_in_band + column). Per search node:

* band update of a changed word: its 3x3 "row r meets box k" occupancy is reduced to the
  union of the permutations it contains (a digit sits once in each row and once in each
  box of a band): locked candidates inside the band, and hidden singles of rows and boxes
  show up as rows holding one bit. Newly placed cells leave the other digits' words and
  their columns leave the digit's other bands;
* stack update of a changed digit: the same permutation filter on (band x column) inside
  each stack (locked candidates along columns), then hidden singles in columns;
* naked singles and empty cells: bit-sliced counts of the nine words of a band;
* branching on a cell with two candidates when there is one (else the fewest), with an
  explicit stack of 30-word snapshots (depth <= 81).

Hot code is written inline in the kernel on purpose: a numba call that passes arrays
costs reference-count updates on every call, which here would cost more than the work.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.bits import ctz as _ctz
from solvers.bits import fill_items as _fill
from solvers.bits import popcount as _popcnt
from solvers.bits import rng_init as _rng_init
from solvers.bits import rng_next as _rng_next
from solvers.clock import monotonic_ns
from solvers.exact.base import BUDGET, DONE, LIMIT, STOPPED, TIMEOUT

_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_BAND = np.uint64(0x7FF_FFFF)  # 27 bits: a band of three rows
_ROW = np.uint64(0x1FF)
_DIGITS = np.uint64(0x1FF)
_CHECK_EVERY = 255  # nodes between two looks at the clock and the stop flag (mask)


def _build_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shrink, perm27, perm9). shrink[row9] = the 3-bit set of boxes a 9-bit band row
    touches. For a 3x3 occupancy s (bit 3*i + j: line i meets segment j) the permutations
    contained in s are the ways to put a digit once per line and once per segment;
    perm9[s] is their union (0 when there is none), perm27[s] the same as a band mask."""
    shrink = np.array([sum(1 << k for k in range(3) if (v >> (3 * k)) & 7) for v in range(512)], np.uint64)
    perms = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    perm9 = np.zeros(512, dtype=np.uint64)
    perm27 = np.zeros(512, dtype=np.uint64)
    for s in range(512):
        for p in perms:
            bits = [3 * i + p[i] for i in range(3)]
            if all((s >> bit) & 1 for bit in bits):
                for bit in bits:
                    perm9[s] |= 1 << bit
                    perm27[s] |= 7 << (9 * (bit // 3) + 3 * (bit % 3))
    return shrink, perm27, perm9


_SHRINK, _PERM27, _PERM9 = _build_tables()  # frozen into the compiled code as constants


@njit(cache=True, nogil=True)
def _pick(m, r):  # type: ignore[no-untyped-def]
    """Return the (r mod popcount)-th set bit of `m` as a one-bit mask."""
    k = np.int64(r % np.uint64(_popcnt(m)))
    for _ in range(k):
        m &= m - _ONE
    return m & (~m + _ONE)


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
    k0, k1, k2 = _ZERO, _ZERO, _ZERO
    for k in range(3):
        sh = np.uint64(3 * k)
        s = ((c0 >> sh) & seven) | (((c1 >> sh) & seven) << np.uint64(3))
        m = _PERM9[s | (((c2 >> sh) & seven) << np.uint64(6))]
        if m == _ZERO:
            return False, a0, a1, a2
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
            lb = x & (~x + _ONE)
            x ^= lb
            a &= ~_row_peers(lb)
        if b == 0:
            a0 = a
        elif b == 1:
            a1 = a
        else:
            a2 = a
    return True, a0, a1, a2


@njit(cache=True, nogil=True)
def kernel9(
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
    """The 9x9 kernel: the common exact signature (its tables are module constants)."""
    nine = np.uint64(9)
    eighteen = np.uint64(18)
    nb = givens.shape[0]
    f = np.empty(27, dtype=np.uint64)
    u = np.empty(3, dtype=np.uint64)
    pairs = np.empty(3, dtype=np.uint64)
    stk = np.empty((82, 30), dtype=np.uint64)  # the 27 words and 3 unsolved masks per level
    stk_b = np.empty(82, dtype=np.int64)
    stk_lb = np.empty(82, dtype=np.uint64)
    stk_rem = np.empty(82, dtype=np.uint64)
    for i in range(nb):
        t0 = monotonic_ns()
        end_ns = deadline_ns
        if time_limit_ns > 0 and (end_ns == 0 or t0 + time_limit_ns < end_ns):
            end_ns = t0 + time_limit_ns
        if stop[0] != 0:
            _fill(out_status, i, STOPPED, out_status.shape[0] - i)
            break
        if end_ns != 0 and t0 >= end_ns:
            out_status[i] = TIMEOUT
            out_ns[i] = monotonic_ns() - t0
            continue
        rng = _rng_init(seed, i)
        for k in range(27):
            f[k] = _BAND
        u[0], u[1], u[2] = _BAND, _BAND, _BAND
        for x in range(81):
            v = np.int64(givens[i, x])
            if v > 9:
                f[0] = _ZERO  # not a 9x9 value: report the puzzle unsolvable
            elif v != 0:  # keep the digit alone in its band row: the band update does the rest
                b = x // 27
                f[3 * (v - 1) + b] &= ~_row_peers(_ONE << np.uint64(x - 27 * b))
        todo = _BAND  # words waiting for a band update
        dd = _DIGITS  # digits waiting for a stack update
        count, nodes, guesses, depth, status = 0, 1, 0, 0, DONE
        while True:
            ok = True
            while ok:  # propagate to a fixpoint (or a contradiction)
                pos = _ZERO
                while todo:  # ascending passes: a word flagged behind the pass waits for the next
                    ahead = (todo >> pos) << pos
                    j = _ctz(ahead if ahead else todo)
                    pos = np.uint64(j + 1)
                    todo &= ~(_ONE << np.uint64(j))
                    d = j // 3
                    b = j - 3 * d
                    a = f[j]
                    s = _SHRINK[a & _ROW] | (_SHRINK[(a >> nine) & _ROW] << np.uint64(3))
                    a2 = a & _PERM27[s | (_SHRINK[a >> eighteen] << np.uint64(6))]
                    if a2 == _ZERO:
                        ok = False
                        break
                    dd |= np.uint64(a2 != a) << np.uint64(d)
                    f[j] = a2
                    r0, r1, r2 = a2 & _ROW, a2 & (_ROW << nine), a2 & (_ROW << eighteen)
                    single = _ZERO
                    if (r0 & (r0 - _ONE)) == _ZERO:
                        single |= r0
                    if (r1 & (r1 - _ONE)) == _ZERO:
                        single |= r1
                    if (r2 & (r2 - _ONE)) == _ZERO:
                        single |= r2
                    new = single & u[b]
                    if new == _ZERO:
                        continue
                    u[b] &= ~new  # placed: the cells leave the other digits, the columns the other bands
                    for d2 in range(9):  # flags computed without branches: they are unpredictable
                        j2 = 3 * d2 + b
                        x = f[j2]
                        y = x & ~new if d2 != d else x
                        f[j2] = y
                        ch = np.uint64(x != y)
                        todo |= ch << np.uint64(j2)
                        dd |= ch << np.uint64(d2)
                    cols = _spread(_columns(new))
                    for k in range(1, 3):
                        j2 = 3 * d + (b + k) % 3
                        x = f[j2]
                        f[j2] = x & ~cols
                        ch = np.uint64((x & cols) != _ZERO)
                        todo |= ch << np.uint64(j2)
                        dd |= ch << np.uint64(d)
                if not ok:
                    break
                if dd:
                    cur = dd
                    dd = _ZERO
                    while cur:
                        d = _ctz(cur)
                        cur &= cur - _ONE
                        j = 3 * d
                        good, x0, x1, x2 = _stack_update(f[j], f[j + 1], f[j + 2], u[0], u[1], u[2])
                        if not good:
                            ok = False
                            break
                        ch = np.uint64(x0 != f[j]) | (np.uint64(x1 != f[j + 1]) << _ONE)
                        ch |= np.uint64(x2 != f[j + 2]) << np.uint64(2)
                        f[j], f[j + 1], f[j + 2] = x0, x1, x2
                        if ch:
                            todo |= ch << np.uint64(j)
                            dd |= _ONE << np.uint64(d)
                    if not ok:
                        break
                    if todo:
                        continue
                found = False
                for b in range(3):  # naked singles and empty cells, by bit-sliced counting
                    ub = u[b]
                    one, two, three = _ZERO, _ZERO, _ZERO
                    for d in range(9):
                        x = f[3 * d + b]
                        three |= two & x
                        two |= one & x
                        one |= x
                    if ub & ~one:
                        ok = False
                        break
                    ns = ub & one & ~two
                    pairs[b] = ub & two & ~three
                    if ns == _ZERO:
                        continue
                    found = True
                    for d in range(9):
                        x = f[3 * d + b] & ns
                        if x:
                            todo |= _ONE << np.uint64(3 * d + b)
                            dd |= _ONE << np.uint64(d)
                        while x:
                            lb = x & (~x + _ONE)
                            x ^= lb
                            f[3 * d + b] &= ~_row_peers(lb)
                if not found:
                    break
            if ok and (u[0] | u[1] | u[2]) == _ZERO:  # every cell placed: a solution
                if count < keep:
                    for j in range(27):
                        x = f[j]
                        while x:
                            out_solutions[i, count, 27 * (j % 3) + _ctz(x)] = j // 3 + 1
                            x &= x - _ONE
                count += 1
                if count >= limit:
                    status = LIMIT
                    break
                ok = False
            if max_nodes > 0 and nodes >= max_nodes and (ok or depth > 0):
                status = BUDGET
                break
            if ok:  # branch: a cell with two candidates if any, else one with the fewest
                npairs = _popcnt(pairs[0]) + _popcnt(pairs[1]) + _popcnt(pairs[2])
                b, lb = 0, _ZERO
                if npairs > 0:
                    k = 0
                    if seed != 0:
                        rng = _rng_next(rng)
                        k = np.int64(rng % np.uint64(npairs))
                    for b in range(3):
                        pc = _popcnt(pairs[b])
                        if k < pc:
                            lb = _pick(pairs[b], np.uint64(k))
                            break
                        k -= pc
                else:
                    best, ties = 10, 0
                    for b2 in range(3):
                        rest = u[b2]
                        while rest:
                            lb2 = rest & (~rest + _ONE)
                            rest ^= lb2
                            pc = 0
                            for d in range(9):
                                pc += np.int64((f[3 * d + b2] & lb2) != _ZERO)
                            if pc < best:
                                best, b, lb, ties = pc, b2, lb2, 1
                            elif pc == best and seed != 0:
                                ties += 1
                                rng = _rng_next(rng)
                                if rng % np.uint64(ties) == _ZERO:
                                    b, lb = b2, lb2
                m = _ZERO
                for d in range(9):
                    m |= np.uint64((f[3 * d + b] & lb) != _ZERO) << np.uint64(d)
                for k in range(27):
                    stk[depth, k] = f[k]
                stk[depth, 27], stk[depth, 28], stk[depth, 29] = u[0], u[1], u[2]
                stk_b[depth] = b
                stk_lb[depth] = lb
                depth += 1
                guesses += 1
            else:  # back to the deepest branch with a digit left to try
                if depth == 0:
                    break
                depth -= 1
                for k in range(27):
                    f[k] = stk[depth, k]
                u[0], u[1], u[2] = stk[depth, 27], stk[depth, 28], stk[depth, 29]
                b = stk_b[depth]
                lb = stk_lb[depth]
                m = stk_rem[depth]
            if seed == 0:
                v = m & (~m + _ONE)
            else:
                rng = _rng_next(rng)
                v = _pick(m, rng)
            stk_rem[depth - 1 if ok else depth] = m & ~v
            if ok or m != v:
                depth += 0 if ok else 1  # keep the level while digits are left to try
            nodes += 1
            if (nodes & _CHECK_EVERY) == 0:
                if stop[0] != 0:
                    status = STOPPED
                    break
                if end_ns != 0 and monotonic_ns() >= end_ns:
                    status = TIMEOUT
                    break
            d = _ctz(v)
            f[3 * d + b] &= ~_row_peers(lb)
            todo = _ONE << np.uint64(3 * d + b)
            dd = _ONE << np.uint64(d)
        out_counts[i] = count
        out_status[i] = status
        out_nodes[i] = nodes
        out_guesses[i] = guesses
        out_ns[i] = monotonic_ns() - t0
        if status == STOPPED:
            _fill(out_status, i + 1, STOPPED, out_status.shape[0] - i - 1)
            break
