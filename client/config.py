"""Client settings (environment variables `SUDOKU_BATCH_*`), URL masking, broker checks and `connect`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.contract.keys import KEY_PREFIX
from pipeline.contract.tasks import (
    DEFAULT_QUEUE,
    MAX_SPLIT_BYTES,
    MAX_TASK_CHARS,
    QueueName,
    settings_refused,
)

if TYPE_CHECKING:
    import redis

OUTAGE_RETRIES = 32  # reconnection attempts, 0.1 s growing to 2 s apart: ~1 min of broker outage


class ClientSettings(BaseSettings):
    """What the producer and the collector need to know; every field can come from the environment."""

    model_config = SettingsConfigDict(env_prefix="SUDOKU_BATCH_", extra="ignore")

    broker: str | None = None  # redis://[:password@]host:port/db or rediss://; None = embedded
    queue: QueueName = DEFAULT_QUEUE
    key_prefix: str = KEY_PREFIX
    result_ttl: int = Field(default=3600, ge=1, le=365 * 86400)  # s a collected result stays (collect again)
    job_ttl: int = Field(default=7 * 86400, ge=1, le=365 * 86400)  # s an uncollected result or job meta waits
    chunk_seconds: float = Field(default=1.0, gt=0, le=3600)  # target solving time of one chunk
    max_chunk_bytes: int = Field(default=1 << 20, ge=1, le=MAX_TASK_CHARS)  # task puzzle text; results ~5x
    max_split_bytes: int = Field(default=8 << 20, ge=1, le=MAX_SPLIT_BYTES // 2)  # input read by one worker
    connect_timeout: float = Field(default=2.0, gt=0, le=600)  # seconds to reach the broker before giving up
    socket_timeout: float = Field(default=10.0, gt=0, le=3600)
    visibility_timeout: int = Field(default=4 * 3600, ge=1, le=30 * 86400)  # s: an unacked chunk redelivered
    task_time_limit_floor: int = Field(default=300, ge=1, le=7 * 86400)  # s: the Celery hard limit's floor
    poll_interval: float = Field(default=0.05, gt=0, le=60)  # seconds between checks for new results
    producer_stale_s: float = Field(default=120.0, gt=0, le=7 * 86400)  # a producer silent this long has died
    resend_after: float = Field(default=30.0, gt=0, le=86400)  # s without results: lost chunk tasks re-sent
    stop_ttl: int = Field(default=60, ge=1, le=30 * 86400)  # s a purged job's stop key lives (seen in 1 s)
    no_worker_notice_s: float = Field(default=10.0, gt=0, le=86400)  # this long with no worker: say so
    ack_s: float = Field(default=1.0, ge=0, le=3600)  # broker solve: output fsync'd, Redis freed this often
    ack_mb: float = Field(default=8.0, ge=0, le=1 << 20)  # ... and whenever this many MB were written since


_PASSWORD = re.compile(r"(\w+://)([^@/\s]*)@")


def read_settings() -> ClientSettings:
    """This command's settings from the environment; ValueError in one line naming each bad variable (and
    why, without its value) instead of pydantic's multi-line report."""
    try:
        return ClientSettings()
    except ValidationError as exc:
        raise ValueError(settings_refused(exc, ClientSettings.model_config.get("env_prefix", ""))) from None


def mask_url(url: str) -> str:
    """Hide the passwords of broker URLs in a text: `redis://:****@host:6379/0`."""

    def repl(m: re.Match[str]) -> str:
        user, _, password = m.group(2).partition(":")
        if not password and not user:
            return m.group(0)
        if not password:  # redis://password@host is also a password
            return f"{m.group(1)}****@"
        return f"{m.group(1)}{user}:****@"

    return _PASSWORD.sub(repl, url)


def check_broker_url(url: str) -> None:
    """Raise ValueError with a readable reason unless `url` is a redis:// or rediss:// URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError(
            f"broker URL {mask_url(url)!r}: expected redis://[:password@]host:port/db or rediss://"
        )
    if not parts.hostname:
        raise ValueError(f"broker URL {mask_url(url)!r} names no host")


class BrokerUnreachable(ConnectionError):
    """The broker did not answer; the message names the (masked) URL and the reason."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach broker {mask_url(url)}: {reason}")


def connect(url: str, settings: ClientSettings) -> redis.Redis:
    """Open a Redis client with short timeouts and check that it answers (BrokerUnreachable if not)."""
    import redis
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.retry import Retry

    try:
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=settings.connect_timeout,
            socket_timeout=settings.socket_timeout,
            retry_on_timeout=False,
            health_check_interval=30,
        )
        client.ping()
    except (redis.RedisError, OSError, ValueError) as exc:
        raise BrokerUnreachable(url, _reason(exc)) from None
    # Connected: from now on ride out a broker restart (about a minute) instead of failing the job.
    client.set_retry(Retry(ExponentialWithJitterBackoff(base=0.1, cap=2.0), OUTAGE_RETRIES))
    return client


def _reason(exc: BaseException) -> str:
    """The shortest useful reason from a redis-py error (its messages repeat host and port)."""
    text = str(exc).strip() or type(exc).__name__
    if "Connection refused" in text:
        return "Connection refused"
    if "Timeout" in type(exc).__name__ or "timed out" in text:
        return "connection timed out"
    return text.splitlines()[0][:200]
