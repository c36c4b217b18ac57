"""Stop flags: how another thread tells running solvers to give up (kernels and races check between slices).

A flag is an int64[1] array, 0 until raised. `StopPoller` raises one when a condition
holds, asking it every `interval` seconds from a daemon thread: a worker passes a
condition that reads its broker (a job purged, later a puzzle solved elsewhere), the
solvers only ever see the array. No broker import here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

import numpy as np


def new_flag() -> np.ndarray:
    """A lowered stop flag: int64[1], 0."""
    return np.zeros(1, dtype=np.int64)


def raise_flag(flag: np.ndarray) -> None:
    """Raise `flag`: every solver holding it stops at its next check."""
    flag[0] = 1


class StopPoller:
    """Raise `flag` once `should_stop()` returns True; ask every `interval` s while the `with` block runs.

    `should_stop` raising counts as "not yet" (a broker blinking must not stop the work);
    `on_error`, when given, hears about it. The thread ends with the block.
    """

    def __init__(
        self,
        should_stop: Callable[[], bool],
        interval: float,
        flag: np.ndarray | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.should_stop = should_stop
        self.interval = interval
        self.flag = new_flag() if flag is None else flag
        self.on_error = on_error
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def raised(self) -> bool:
        """True once the flag is up (by this poller or anyone else)."""
        return bool(self.flag[0] != 0)

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                if self.should_stop():
                    raise_flag(self.flag)
                    return
            except Exception as exc:  # noqa: BLE001 - reported, and asked again next round
                if self.on_error is not None:
                    self.on_error(exc)

    def __enter__(self) -> StopPoller:
        self._thread = threading.Thread(target=self._run, name="stop-poller", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
