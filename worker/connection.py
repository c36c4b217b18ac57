"""This worker process's Redis connection to the job store (made after fork, never shared by processes)."""

from __future__ import annotations

import os

import redis

from worker.config import settings

_client: tuple[int, redis.Redis] | None = None


def store_client() -> redis.Redis:
    """This process's Redis connection (a new one in a forked child)."""
    global _client
    if _client is None or _client[0] != os.getpid():
        client = redis.Redis.from_url(
            settings.broker,
            socket_connect_timeout=settings.connect_timeout,
            socket_timeout=settings.socket_timeout,
        )
        _client = (os.getpid(), client)
    return _client[1]
