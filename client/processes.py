"""Local worker processes (embedded solve, local generate): they die with the command that forked them.

Each process, as it starts, asks the kernel for SIGKILL when its parent dies (Linux
PR_SET_PDEATHSIG), so even a SIGKILL of the command leaves no orphan; it ignores Ctrl-C
and takes the default action for SIGTERM and SIGHUP, which the parent handles for it.
The parent stops them at once with `kill_pool` when the command is interrupted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Pool initializer: SIGKILL this process when `parent` dies; leave interrupts to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)  # not the parent's Python handlers, inherited by the fork
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the parent's kill_pool still applies
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def kill_pool(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's processes now (work in flight is dropped) and let the executor go."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public handle on them before 3.14
    for process in processes:
        with contextlib.suppress(OSError, ValueError):
            process.kill()
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(2.0)
    pool.shutdown(wait=False, cancel_futures=True)
