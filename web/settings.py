"""What `serve` may be asked to do: every limit a request meets, bounded when the server starts."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.contract.tasks import DEFAULT_TIME_LIMIT_S

MAX_TOKEN_CHARS = 256
MIN_TOKEN_CHARS = 16  # a token guessable in a few tries protects nothing
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class ServeSettings(BaseModel):
    """The server's limits; a field out of its range is a usage error naming it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)  # 0: any free port (tests)
    token: str | None = Field(  # URL- and cookie-safe characters: it travels in both
        default=None, min_length=MIN_TOKEN_CHARS, max_length=MAX_TOKEN_CHARS, pattern=r"^[A-Za-z0-9._~-]+$"
    )
    max_time_limit: float = Field(default=60.0, gt=0, le=3600)  # seconds per puzzle a request may ask
    # seconds per puzzle of a request naming none, single puzzles and uploads alike: the command line's
    # default (`solve`, `submit`), within max_time_limit (the page's field shows it)
    default_time_limit: float = Field(default=DEFAULT_TIME_LIMIT_S, gt=0, le=3600)
    max_upload_bytes: int = Field(default=32 << 20, ge=1024, le=1 << 30)  # after decompression too
    max_puzzle_chars: int = Field(default=16384, ge=16, le=1 << 20)  # one puzzle's text (64x64 as integers)
    solve_processes: int = Field(default=1, ge=1, le=64)  # local processes for single puzzles
    max_pending: int = Field(default=8, ge=1, le=1000)  # single puzzles solving or waiting at once
    max_jobs_listed: int = Field(default=200, ge=1, le=10000)
    max_jobs_kept: int = Field(default=50, ge=1, le=10000)  # embedded: jobs in memory, the oldest finished go
    max_memory_mb: int = Field(default=1024, ge=1, le=1 << 20)  # embedded: the server's size that drops jobs

    @model_validator(mode="after")
    def _consistent(self) -> ServeSettings:
        """A default time limit within the cap; a token whenever the bind is reachable from elsewhere."""
        if self.default_time_limit > self.max_time_limit:
            object.__setattr__(self, "default_time_limit", self.max_time_limit)
        if self.token is None and not is_loopback(self.host):
            raise ValueError(
                f"--host {self.host} can be reached from other machines: give --token (or "
                "SUDOKU_BATCH_TOKEN), which every request must then carry"
            )
        return self


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1); false for 0.0.0.0 and the rest."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
