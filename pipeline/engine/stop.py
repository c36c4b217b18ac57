"""`StopPoller`: raise a solvers' stop flag once a condition holds, asked from a thread (the solvers only
ever see the flag)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from solvers.kernel.stop import new_flag, raise_flag

log = logging.getLogger(__name__)


class StopPoller:
    """Raise `flag` once `should_stop()` returns True, asked every `interval` s in the `with` block; raising
    counts as "not yet" (a broker blinking must not stop the work), told to `on_error` or logged once."""

    def __init__(
        self,
        should_stop: Callable[[], bool],
        interval: float,
        on_error: Callable[[BaseException], None] | None = None,
        name: str = "stop-poller",
    ) -> None:
        self.should_stop = should_stop
        self.interval = interval
        self.flag = new_flag()
        self.on_error = on_error
        self.name = name
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def raised(self) -> bool:
        """True once the flag is up (by this poller or anyone else)."""
        return bool(self.flag[0] != 0)

    def _run(self) -> None:
        failing = False
        while not self._done.wait(self.interval):
            try:
                stop, failing = self.should_stop(), False
            except Exception as exc:  # noqa: BLE001 - reported, and asked again next round
                if self.on_error is not None:
                    self.on_error(exc)
                elif not failing:
                    log.warning("a stop condition could not be read (asked again): %s", exc)
                stop, failing = False, True
            if stop:
                raise_flag(self.flag)
                return

    def __enter__(self) -> StopPoller:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
