"""The timing of a chunk's parts while it is solved: raced puzzles' answers gathered into parts (`Gather`)
and each part charged the CPU and wall time spent on it (`Clock`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from pipeline.contract.part import PartStats
from solvers.model.result import SolveResult

log = logging.getLogger(__name__)
GATHER_S = 1.0  # raced puzzles ending within this many seconds of the first gathered go in one part


class Gather:
    """Raced puzzles' final answers gathered into parts (`flush`): what ends within `window` seconds of the
    first goes out together, rather than a part file per raced puzzle."""

    def __init__(
        self, flush: Callable[[np.ndarray, list[SolveResult]], None], window: float = GATHER_S
    ) -> None:
        self.flush = flush
        self.window = window
        self._lock = threading.Lock()  # one part published at a time, from either thread
        self._pending: dict[int, SolveResult] = {}
        self._since = 0.0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, answers: list[tuple[int, SolveResult]]) -> None:
        """Gather final answers (position, result); the watching thread starts with the first."""
        with self._lock:
            if not self._pending:
                self._since = time.monotonic()
            self._pending.update(answers)
            if self._thread is None and not self._done.is_set():
                self._thread = threading.Thread(target=self._watch, name="gather", daemon=True)
                self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(self.window / 4):
            with self._lock:
                if self._pending and time.monotonic() - self._since >= self.window:
                    try:
                        self._out()
                    except Exception as exc:  # noqa: BLE001 - kept; the block's end publishes them or raises
                        log.warning("chunk answers wait for the end of the chunk: %s", exc)
                        return

    def _out(self) -> None:
        """Publish what is gathered (the lock held); kept when publishing raises."""
        positions = sorted(self._pending)
        self.flush(np.asarray(positions, dtype=np.int64), [self._pending[i] for i in positions])
        self._pending.clear()

    def __enter__(self) -> Gather:
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._pending:
                self._out()


class Clock:
    """CPU and wall time of the parts of one run: each part is charged what was spent since the last."""

    def __init__(self) -> None:
        self.cpu = self.solver_at = time.process_time()
        self.wall = time.perf_counter()
        self.solver_cpu = 0.0

    def solved(self) -> None:
        """The solvers just handed over answers: what was spent since the last part is solver time."""
        now = time.process_time()
        self.solver_cpu += now - self.solver_at
        self.solver_at = now

    def charge(self, stats: PartStats) -> None:
        """Charge a part with the CPU and wall time since the last one (rendering it included)."""
        now, wall = time.process_time(), time.perf_counter()
        stats.cpu_s, stats.solver_cpu_s, stats.wall_s = now - self.cpu, self.solver_cpu, wall - self.wall
        self.cpu, self.wall, self.solver_cpu, self.solver_at = now, wall, 0.0, now


Cost = tuple[int, int]  # (CPU ns, wall ns) of a run charged to its job: the meta's `cpu_ns`, `chunk_wall_ns`


class Meter:
    """The CPU and wall time of one run of a task, each nanosecond charged to the job once (`cpu`: the
    process's clock where it runs one task at a time, the thread's where it runs other work too)."""

    def __init__(self, cpu: Callable[[], int] = time.process_time_ns) -> None:
        self._cpu = cpu
        self._lock = threading.Lock()  # a chunk's parts go out from two threads (`Gather`)
        self._at = (cpu(), time.monotonic_ns())

    def take(self) -> Cost:
        """What was spent since the last charge (this one included)."""
        with self._lock:
            now = (self._cpu(), time.monotonic_ns())
            spent, self._at = (max(0, now[0] - self._at[0]), max(0, now[1] - self._at[1])), now
        return spent

    def give_back(self, cost: Cost) -> None:
        """A charge that was not written: it goes with the next one."""
        with self._lock:
            self._at = (self._at[0] - cost[0], self._at[1] - cost[1])
