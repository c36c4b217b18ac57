"""Notices on stderr while a broker job waits: no live worker (said once, with how to start one), or a
submission that stopped half way (said once, with what the wait is for and how to resume it).

Nothing else in a waiting `solve`, `collect` or `generate` tells a user that no worker
listens (the progress bar only stands still), so after `after` seconds without a live
worker process one line says so and the wait goes on; a worker that beats resets it. A `collect`
of a job whose `submit` was killed waits for the rest of the input until its producer has been
silent `producer_stale_s` (120 s): `StoppedNotice` says so as soon as the producer is found silent.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

NO_WORKER_S = 10.0  # seconds without a live worker before the notice
log = logging.getLogger(__name__)
CHECK_EVERY_S = 2.0  # the live workers are read at most this often
START_WORKER = "sudoku-batch worker --broker URL"


class NoWorkerNotice:
    """Says once when `live()` (live worker processes) stayed 0 for `after` s; again after workers left."""

    def __init__(
        self,
        live: Callable[[], int],
        say: Callable[[str], None] | None = None,
        after: float = NO_WORKER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.live = live
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.after = after
        self.clock = clock
        self._since = clock()  # no worker seen since then
        self._checked = -1e18
        self._said = False

    def check(self) -> bool:
        """Read the live workers if due; say the notice if it is time; True when it was said now."""
        now = self.clock()
        if now - self._checked < CHECK_EVERY_S:
            return False
        self._checked = now
        try:
            count = self.live()
        except Exception as exc:  # noqa: BLE001 - the broker is away: the wait reports that, not this notice
            log.debug("the live workers could not be read: %s", exc)
            return False
        if count:
            self._since, self._said = now, False
            return False
        if self._said or now - self._since < self.after:
            return False
        self._said = True
        self.say(f"waiting: no live worker on the broker for {self.after:g} s; start one: {START_WORKER}")
        return True


class StoppedNotice:
    """Says once the line `explain()` gives (None while there is nothing to say: the submission goes on),
    reading it at most every CHECK_EVERY_S; a broker that does not answer says nothing."""

    def __init__(
        self,
        explain: Callable[[], str | None],
        say: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.explain = explain
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.clock = clock
        self._checked = -1e18
        self._said = False

    def check(self) -> bool:
        """Say the line if there is one now and it was not said; True when it was said now."""
        now = self.clock()
        if self._said or now - self._checked < CHECK_EVERY_S:
            return False
        self._checked = now
        try:
            line = self.explain()
        except Exception as exc:  # noqa: BLE001 - the broker is away: the wait reports that, not this notice
            log.debug("the submission's state could not be read: %s", exc)
            return False
        if line is None:
            return False
        self._said = True
        self.say(line)
        return True
