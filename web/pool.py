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
from concurrent.futures.process import BrokenProcessPool
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
        self.processes = processes
        self._pool: ProcessPoolExecutor | None = self._start()

    def _start(self) -> ProcessPoolExecutor:
        """Fork the processes now, from the calling thread (the main one: they die with the server)."""
        ctx = multiprocessing.get_context("fork")
        pool = ProcessPoolExecutor(self.processes, mp_context=ctx, initializer=_init, initargs=(os.getpid(),))
        pool.submit(os.getpid).result()
        return pool

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run `fn(*args)` in one of the processes (RuntimeError once the pool is closed).

        A pool broken by a process that died (killed, or crashed in a solver) is replaced first:
        the puzzle it was solving failed, the next one is solved.
        """
        if self._pool is None:
            raise RuntimeError("the server is shutting down")
        try:
            return self._pool.submit(fn, *args)
        except BrokenProcessPool:
            kill_pool(self._pool)
            self._pool = self._start()
            return self._pool.submit(fn, *args)

    def pids(self) -> list[int]:
        """The processes' ids (for the workers panel)."""
        return sorted(getattr(self._pool, "_processes", {}) or {})

    def close(self) -> None:
        """Kill the processes now: a puzzle still solving is dropped with the server."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            kill_pool(pool)
