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
    job_ttl: int = Field(default=7 * 86400, ge=1, le=365 * 86400)  # s an uncollected result may wait
    visibility_timeout: int = Field(default=4 * 3600, ge=1, le=30 * 86400)  # well above the longest chunk
    soft_time_limit: int = Field(default=3600, ge=1, le=7 * 86400)  # a safety net under the per-chunk limits
    time_limit: int = Field(default=3660, ge=1, le=7 * 86400)
    max_attempts: int = Field(default=3, ge=1, le=100)  # deliveries of a chunk before it is answered `error`
    heartbeat_s: float = Field(default=5.0, gt=0, le=600)  # each worker process's liveness beat
    orphan_after_s: float = Field(default=60.0, gt=0, le=7 * 86400)  # an unacked chunk nobody runs: requeued
    stop_poll_s: float = Field(default=0.25, gt=0, le=60)  # how often a running chunk checks its stop key
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
