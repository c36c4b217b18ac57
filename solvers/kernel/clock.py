"""A monotonic nanosecond clock callable from numba-compiled code.

Kernels honour deadlines themselves (a batch call cannot be interrupted from Python) and numba has no
`time`: libc's `clock_gettime` called by symbol name stays cacheable (no baked-in ctypes address) and
reads the clock of `time.monotonic_ns()`.
"""

from __future__ import annotations

import numba as nb
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_CLOCK_MONOTONIC = 1


@intrinsic
def _clock_gettime_ns(typingctx):  # type: ignore[no-untyped-def]
    """Emit a call to clock_gettime(CLOCK_MONOTONIC) returning int64 nanoseconds."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        i64 = ir.IntType(64)
        i32 = ir.IntType(32)
        timespec = ir.LiteralStructType([i64, i64])
        fnty = ir.FunctionType(i32, [i32, timespec.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, timespec)  # entry block: safe inside loops
        builder.call(fn, [ir.Constant(i32, _CLOCK_MONOTONIC), ts])
        zero = ir.Constant(i32, 0)
        sec = builder.load(builder.gep(ts, [zero, zero]))
        nsec = builder.load(builder.gep(ts, [zero, ir.Constant(i32, 1)]))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)

    return types.int64(), codegen


@nb.njit(cache=True, nogil=True)
def monotonic_ns() -> int:
    """Return CLOCK_MONOTONIC in nanoseconds; usable inside and outside njit code."""
    return _clock_gettime_ns()
