"""Result records (the public fields) and the writers: JSON Lines straight through, or CSV.

The workers already rendered each record as one JSON line, so the JSON Lines writer
only copies bytes. A regular file is written under a temporary name and renamed when the
job completes (or is interrupted: the records written so far are kept), so a crashed
`collect` leaves no half file and its re-run writes it whole; a FIFO or a device is
written straight through (`client.target`).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from client.target import FLUSH_S, Target
from solvers.chunk import ChunkResult
from solvers.chunk_records import FIELDS


@dataclass(slots=True)
class Record:
    """One puzzle's result as the output holds it."""

    line: int
    input: str
    index: int
    puzzle: str
    status: str
    solution: str | None
    cost: int | None
    solver: str | None
    time_ms: float | None
    error: str | None
    nodes: int
    guesses: int
    restarts: int
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str | bytes) -> Record:
        """Read a record from its JSON line."""
        data = json.loads(text)
        return cls(**{k: data[k] for k in FIELDS})

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict in field order."""
        return {k: getattr(self, k) for k in FIELDS}


class Output:
    """Where records go: a file (`client.target.Target`) or stdout, as JSON Lines or CSV."""

    def __init__(self, path: str | None, fmt: str = "jsonl") -> None:
        if fmt not in ("jsonl", "csv"):
            raise ValueError(f"unknown format {fmt!r}; use jsonl or csv")
        self.fmt = fmt
        self.path = None if path in (None, "-") else Path(path)  # type: ignore[arg-type]
        self._target: Target | None = None
        if self.path is None:
            self.stream: IO[bytes] = sys.stdout.buffer
        else:
            self._target = Target(self.path)
            self.stream = self._target.stream
        self._csv_header = False
        self._flushed = time.monotonic()

    def write(self, result: ChunkResult, start: int, stop: int) -> None:
        """Write records `start:stop` of a chunk result (flushed at least every FLUSH_S: a reader,
        a FIFO's or `tail -f`'s, sees results as they come, not a megabyte at a time)."""
        if stop <= start:
            return
        if self.fmt == "jsonl":
            if start == 0 and stop == len(result):
                self.stream.write(result.records)
                self.stream.write(b"\n")
            else:
                self.stream.write(b"\n".join(result.lines()[start:stop]) + b"\n")
        else:
            self._write_csv(result.lines()[start:stop])
        now = time.monotonic()
        if now - self._flushed >= FLUSH_S:
            self.stream.flush()
            self._flushed = now

    def _write_csv(self, lines: list[bytes]) -> None:
        self.stream.write(csv_text(lines, header=not self._csv_header).encode())
        self._csv_header = True

    def close(self, keep: bool) -> None:
        """Flush; a file is renamed into place when `keep` (complete, or interrupted), else removed."""
        if self.fmt == "csv" and not self._csv_header and keep:
            self.stream.write((",".join(FIELDS) + "\n").encode())
        if self._target is None:
            self.stream.flush()
            return
        target, self._target = self._target, None
        target.close(keep)


def csv_text(lines: list[bytes], header: bool) -> str:
    """CSV rows (the FIELDS' header row first when `header`) of JSON Lines records; counters as JSON."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    if header:
        writer.writerow(FIELDS)
    for line in lines:
        data = json.loads(line)
        data["counters"] = json.dumps(data["counters"], separators=(",", ":"))
        writer.writerow(["" if data[k] is None else data[k] for k in FIELDS])
    return text.getvalue()
