"""The server's own local processes for single puzzles (solving, and making random ones).

Forked once, from the main thread, before the server starts its threads; each process
warms the compiled solvers, ignores Ctrl-C and dies with the server (PR_SET_PDEATHSIG, see
`client.processes`), so no signal that ends `serve` leaves one behind.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from client.processes import die_with_parent, kill_pool


def _init(parent: int) -> None:
    """Die with the server, leave interrupts to it, load the compiled solvers once."""
    die_with_parent(parent)
    from solvers.warm import warm_all

    warm_all()


class PuzzlePool:
    """A few worker processes that take one puzzle at a time, apart from the batch jobs' processes."""

    def __init__(self, processes: int) -> None:
        ctx = multiprocessing.get_context("fork")
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            processes, mp_context=ctx, initializer=_init, initargs=(os.getpid(),)
        )
        self.processes = processes
        self._pool.submit(os.getpid).result()  # forks every process now, from this (the main) thread

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run `fn(*args)` in one of the processes (RuntimeError once the pool is closed)."""
        if self._pool is None:
            raise RuntimeError("the server is shutting down")
        return self._pool.submit(fn, *args)

    def pids(self) -> list[int]:
        """The processes' ids (for the workers panel)."""
        return sorted(getattr(self._pool, "_processes", {}) or {})

    def close(self) -> None:
        """Kill the processes now: a puzzle still solving is dropped with the server."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            kill_pool(pool)
