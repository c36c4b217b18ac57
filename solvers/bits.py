"""Bit and random-number primitives shared by the compiled kernels.

One copy for every kernel: hardware popcount / trailing-zero count (LLVM intrinsics),
the per-puzzle xorshift64 stream, and the deadline/stop check. Numba's on-disk cache
does not notice edits to a module a cached function calls, so after changing this
file during development clear the caches (`make clean-cache`); installs are unaffected
(every file is rewritten, so every cache entry is stale).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from solvers.clock import monotonic_ns
from solvers.codes import STOPPED, TIMEOUT

ONE = np.uint64(1)
ZERO = np.uint64(0)
ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@intrinsic
def popcount(typingctx, x):  # type: ignore[no-untyped-def]
    """Population count (llvm.ctpop) of an unsigned integer, as int64."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        r = builder.ctpop(args[0])
        return builder.zext(r, ir.IntType(64)) if r.type.width < 64 else r

    return types.int64(x), codegen


@intrinsic
def ctz(typingctx, x):  # type: ignore[no-untyped-def]
    """Trailing zero count (llvm.cttz) of a non-zero unsigned integer, as int64."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        r = builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
        return builder.zext(r, ir.IntType(64)) if r.type.width < 64 else r

    return types.int64(x), codegen


@njit(cache=True, nogil=True, inline="always")
def rng_next(state):  # type: ignore[no-untyped-def]
    """One xorshift64 step (the state must be non-zero)."""
    state ^= state << np.uint64(13)
    state ^= state >> np.uint64(7)
    state ^= state << np.uint64(17)
    return state


@njit(cache=True, nogil=True)
def rng_init(seed, index):  # type: ignore[no-untyped-def]
    """A non-zero xorshift64 state for puzzle `index` of a batch run with `seed` (splitmix64)."""
    z = np.uint64(seed) + np.uint64(index + 1) * np.uint64(0x9E37_79B9_7F4A_7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58_476D_1CE4_E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D0_49BB_1331_11EB)
    z = z ^ (z >> np.uint64(31))
    return z if z != ZERO else np.uint64(0x2545_F491_4F6C_DD1D)


@njit(cache=True, nogil=True)
def nth_bit(mask, k):  # type: ignore[no-untyped-def]
    """Return the index of the k-th (0-based) set bit of `mask`."""
    for _ in range(k):
        mask &= mask - ONE
    return ctz(mask)


@njit(cache=True, nogil=True)
def interrupted(stop, end_ns):  # type: ignore[no-untyped-def]
    """Return STOPPED, TIMEOUT, or -1 to go on (`end_ns` 0 = no time limit)."""
    if stop[0] != 0:
        return STOPPED
    if end_ns != 0 and monotonic_ns() >= end_ns:
        return TIMEOUT
    return -1
