"""The resend sweep: a collector re-sends chunk tasks the broker lost (kombu's pop can lose one as Redis
stops: docs/decisions.md) from the job's outbox: those older than `resend_after` no live worker solves, once
the broker queue has drained. Safe: result writes are idempotent per chunk and collectors skip repeated
arrivals.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from client.redis_store import RedisJobStore
from client.transport import Transport
from pipeline.contract.outbox import parse_task


class Resender:
    """Re-sends a job's lost chunk tasks when results stop arriving (broker mode only)."""

    def __init__(
        self, store: RedisJobStore, job: str, transport: Callable[[], Transport], after: float
    ) -> None:
        self.store = store
        self.job = job
        self.transport = transport  # built on first use: most collections never resend
        self.after = after
        self._last = time.monotonic()
        self.resent = 0

    def sweep(self, idle: float) -> int:
        """Re-send stale outbox tasks after `after` s without results (at most every `after` s); return count
        (a broker outage is no error: the tasks stay in the outbox for the next sweep)."""
        now = time.monotonic()
        if idle < self.after or now - self._last < self.after:
            return 0
        self._last = now
        count = 0
        try:
            if self.store.queued():  # workers are still busy with queued tasks: nothing is lost yet
                return 0
            running = set(self.store.current().values())  # `job:chunk` a live worker is solving
            for chunk, (sent_at, payload) in sorted(self.store.outbox(self.job).items()):
                if time.time() - sent_at < self.after or f"{self.job}:{chunk}" in running:
                    continue
                if self.store.claim_resend(self.job, chunk, sent_at):
                    self.transport().send(parse_task(payload))
                    count += 1
        except (ConnectionError, redis.RedisError):  # the transport's errors are ConnectionError
            pass
        self.resent += count
        return count
