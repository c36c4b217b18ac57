"""The resend sweep: a collector re-sends chunk tasks the broker lost, from the job's outbox.

Kombu's Redis transport pops a message (BRPOP) and records it as unacknowledged in a
second step; if Redis stops in between, the message is in neither place and no worker
ever solves the chunk. The producer keeps every sent task in the job's outbox until
its result is stored, so a collector that has waited `resend_after` seconds without a
result sends again, by name, each outbox task older than that which no live worker is
solving, once the broker queue has drained (before that, a task still queued behind slow
chunks would be sent twice for nothing), at the priority the producer sent it at
(`client.transport.CeleryTransport`).
Re-sending is safe: result writes are idempotent per chunk and collectors skip repeated arrivals.
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
        """Re-send stale outbox tasks after `after` s without results (at most every `after` s); return count.

        A broker outage during the sweep is not an error: the tasks stay in the outbox
        and the next sweep tries again.
        """
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
