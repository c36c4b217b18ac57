"""The task request: time limits a message asks for outside the sane range are ignored (a negative one killed
the pool process before the delivery was counted: the message came back for ever), and each chunk message is
recorded until its result is stored (for the orphan sweep, `worker.heartbeat`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import redis
from celery.worker.request import Request

from worker.config import settings
from worker.connection import store_client
from worker.heartbeat import chunk_of, record_delivery

log = logging.getLogger(__name__)
MIN_TIME_LIMIT_S = 10.0  # a chunk's first step (counting its delivery) takes milliseconds; 10 s is plenty


def sane_limit(value: Any) -> float | None:
    """`value` if it is a time limit in seconds a chunk may get, else None (the task's default)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not MIN_TIME_LIMIT_S <= value <= settings.visibility_timeout:
        return None
    return float(value)


class SaneLimitsRequest(Request):
    """A Celery request whose header time limits are kept only when sane, and whose chunk message is
    recorded as it arrives (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        asked = self.time_limits
        hard, soft = (list(asked) + [None, None])[:2] if isinstance(asked, (list, tuple)) else (None, None)
        sane = (sane_limit(hard), sane_limit(soft))
        if any(v is not None and s is None for v, s in zip((hard, soft), sane, strict=True)):
            why = "task %s asked for time limits %s: ignored, the defaults apply"
            log.warning(why, self.id, repr(asked)[:60])
        self.time_limits = sane
        self._record()

    def _record(self) -> None:
        """Record this chunk message's delivery tag (its result write drops the record)."""
        tag = getattr(self.message, "delivery_tag", None)
        args, kwargs = self.args, self.kwargs
        payload = kwargs.get("task") if isinstance(kwargs, dict) and kwargs else (args or [None])[0]
        chunk = chunk_of(payload)
        if tag is None or chunk is None:
            return
        try:  # bookkeeping: a Redis away or full must not refuse the task
            record_delivery(store_client(), str(tag), chunk, time.time())
        except redis.RedisError as exc:
            log.warning("chunk %s: its delivery is not recorded (no orphan sweep for it): %s", chunk, exc)
