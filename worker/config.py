"""Worker settings from the environment (prefix `SUDOKU_BATCH_`), read once per process."""

from __future__ import annotations

from functools import cached_property

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.contract.keys import KEY_PREFIX
from pipeline.contract.tasks import DEFAULT_QUEUE, QueueName, settings_refused
from pipeline.engine.roots import DataRoots


class WorkerSettings(BaseSettings):
    """How a worker reaches the broker, where it stores results, and its safety nets."""

    model_config = SettingsConfigDict(env_prefix="SUDOKU_BATCH_", extra="ignore")

    broker: str = "redis://127.0.0.1:6379/0"
    queue: QueueName = DEFAULT_QUEUE
    key_prefix: str = KEY_PREFIX
    # seconds an uncollected result may wait (as the client's)
    job_ttl: int = Field(default=7 * 86400, ge=1, le=365 * 86400)
    # well above the longest chunk (~1 s of work, hard-capped below)
    visibility_timeout: int = Field(default=4 * 3600, ge=1, le=30 * 86400)
    # default safety net; the producer sends per-chunk limits
    soft_time_limit: int = Field(default=3600, ge=1, le=7 * 86400)
    time_limit: int = Field(default=3660, ge=1, le=7 * 86400)
    # deliveries of one chunk before it is answered with `error`
    max_attempts: int = Field(default=3, ge=1, le=100)
    # liveness beat of each worker process (for `status`)
    heartbeat_s: float = Field(default=5.0, gt=0, le=600)
    # an unacked chunk nobody live is solving is requeued after this
    orphan_after_s: float = Field(default=60.0, gt=0, le=7 * 86400)
    # how often a chunk being solved checks its job's stop key (purge)
    stop_poll_s: float = Field(default=0.25, gt=0, le=60)
    connect_timeout: float = Field(default=3.0, gt=0, le=600)
    socket_timeout: float = Field(default=30.0, gt=0, le=3600)
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


def read_settings() -> WorkerSettings:
    """This worker's settings; a bad variable ends the process at start in one line naming it and why (not its
    value), instead of pydantic's report inside Celery's traceback."""
    try:
        return WorkerSettings()
    except ValidationError as exc:
        refused = settings_refused(exc, WorkerSettings.model_config.get("env_prefix", ""))
        raise SystemExit(f"sudoku-batch worker: error: {refused}") from None


settings = read_settings()  # this process's settings, read once (the app, the tasks and the sweep share them)
