"""Worker settings from the environment (prefix `SUDOKU_BATCH_`), read once per process."""

from __future__ import annotations

from functools import cached_property

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.contract.keys import KEY_PREFIX
from pipeline.contract.tasks import DEFAULT_QUEUE, QueueName
from pipeline.engine.roots import DataRoots


class WorkerSettings(BaseSettings):
    """How a worker reaches the broker, where it stores results, and its safety nets."""

    model_config = SettingsConfigDict(env_prefix="SUDOKU_BATCH_", extra="ignore")

    broker: str = "redis://127.0.0.1:6379/0"
    queue: QueueName = DEFAULT_QUEUE
    key_prefix: str = KEY_PREFIX
    job_ttl: int = 7 * 86400  # seconds an uncollected result may wait (as the client's)
    visibility_timeout: int = 4 * 3600  # well above the longest chunk (~1 s of work, hard-capped below)
    soft_time_limit: int = 3600  # default safety net; the producer sends per-chunk limits
    time_limit: int = 3660
    max_attempts: int = 3  # deliveries of one chunk before it is answered with `error`
    heartbeat_s: float = 5.0  # liveness beat of each worker process (for `status`)
    orphan_after_s: float = 60.0  # an unacked chunk nobody live is solving is requeued after this
    stop_poll_s: float = 0.25  # how often a chunk being solved checks its job's stop key (purge)
    connect_timeout: float = 3.0
    socket_timeout: float = 30.0
    data_roots: str = ""  # comma-separated paths or URLs: inputs read and datasets written only there

    @field_validator("data_roots")
    @classmethod
    def _roots(cls, value: str) -> str:
        DataRoots.parse(value.split(","))  # a bad root stops the worker at start, in one line
        return value

    @cached_property
    def roots(self) -> DataRoots:
        """Where this worker reads inputs in splits and writes datasets (none: no split, no dataset)."""
        return DataRoots.parse(self.data_roots.split(","))


settings = (
    WorkerSettings()
)  # this process's settings, read once (the app, the tasks and the sweep share them)
