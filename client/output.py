"""Where records go: a file or stdout, as JSON Lines, CSV or Parquet (`pipeline.engine.render` renders them).

A regular file is written under a temporary name and renamed when the job completes (or
is interrupted: the records written so far are kept, a Parquet file with its footer), so
a crashed `collect` leaves no half file and its re-run writes it whole; a FIFO or a
device is written straight through (`client.target`).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import select
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from client.target import FLUSH_S, ReaderGone, Target
from pipeline.contract.part import Part
from pipeline.engine.render.record import Record
from solvers.fields import CSV_HEADER

FORMATS = ("jsonl", "csv", "parquet")
EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}
__all__ = ["FORMATS", "Output", "ReaderGone", "Record", "named_format", "output_format"]


def named_format(path: str | None) -> str | None:
    """The format `path`'s extension names (behind a `.gz` too), or None."""
    if path in (None, "-"):
        return None
    suffixes = [x.lower() for x in Path(path).suffixes]  # type: ignore[arg-type]
    inner = (
        suffixes[-2] if suffixes[-1:] == [".gz"] and len(suffixes) > 1 else suffixes[-1] if suffixes else ""
    )
    return EXTENSIONS.get(inner)


def output_format(path: str | None, given: str | None) -> str:
    """The format of an output: `given` (--format), else the one `path`'s extension names (`.jsonl`
    or `.json`, `.csv`, `.parquet`, behind a `.gz` too), else jsonl. ValueError (one line) when
    the two disagree, or for `.parquet.gz` (Parquet compresses inside the file)."""
    if path in (None, "-"):
        return given or "jsonl"
    suffixes = [x.lower() for x in Path(path).suffixes]  # type: ignore[arg-type]
    gz = suffixes[-1:] == [".gz"]
    inner = suffixes[-2] if gz and len(suffixes) > 1 else None if gz or not suffixes else suffixes[-1]
    implied = EXTENSIONS.get(inner or "")
    if given is not None and implied is not None and given != implied:
        raise ValueError(f"-o {path} names {implied}, not --format {given}: drop one or rename the file")
    fmt = given or implied or "jsonl"
    if gz and fmt == "parquet":
        raise ValueError(f"-o {path}: Parquet compresses inside the file; name it .parquet, not .gz")
    return fmt


def _reader_left(stream: IO[bytes]) -> bool:
    """True when `stream` is a pipe whose reader closed it (its write end polls POLLERR): a part written
    in one piece may fit in the pipe whole, so no write ever meets the closed end (`| head -1`)."""
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's stream): nothing to ask
        return False


class FormatMismatch(RuntimeError):
    """A part rendered by its workers in another format than this output's."""


class Output:
    """Where records go: a file (`client.target.Target`) or stdout, as JSON Lines, CSV or Parquet."""

    def __init__(
        self,
        path: str | None,
        fmt: str = "jsonl",
        say: Callable[[str], None] | None = None,
        resume: str | None = None,
        length: int = 0,
    ) -> None:
        """`say`: where a line for the user goes while a FIFO waits for its reader (`Target`); `resume`
        and `length`: the file an earlier collection left, gone on with from that durable length."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; use jsonl, csv or parquet")
        self.fmt = fmt
        self.path = None if path in (None, "-") else Path(path)  # type: ignore[arg-type]
        self._target: Target | None = None
        self._gzip: gzip.GzipFile | None = None
        if self.path is None:
            self.stream: IO[bytes] = sys.stdout.buffer
        else:
            self._target = Target(self.path, say, resume, length)
            self.stream = self._target.stream
            if self.path.name.lower().endswith(".gz"):  # `-o out.csv.gz`: compressed as it is written
                self._gzip = gzip.GzipFile(filename="", mode="wb", fileobj=self.stream)
                self.stream = self._gzip  # type: ignore[assignment]
        self._csv_header = resume is not None and length > 0  # a resumed CSV file has its header
        self._gone = False  # the reader of a pipe closed it: nothing more can be written
        self._parquet = None
        if fmt == "parquet":
            from pipeline.engine.render.parquet import ParquetSink

            self._parquet = ParquetSink(self.stream)
        self._flushed = time.monotonic()

    def write(self, result: Part, start: int, stop: int) -> None:
        """Write records `start:stop` of a part (flushed at least every FLUSH_S: a reader, a FIFO's or
        `tail -f`'s, sees results as they come, not a megabyte at a time). A part rendered in this
        output's format where it was solved is copied as it came (no record is read); a part held as
        columns is rendered here; a part rendered in another format is refused (FormatMismatch).

        ReaderGone when the reader of a pipe closed it (`solve ... | head -1`).
        """
        if stop <= start:
            return
        if result.columns is None and result.header.format != self.fmt:
            raise FormatMismatch(
                f"job {result.header.job} was rendered as {result.header.format} by its workers: "
                f"write it with --format {result.header.format}"
            )
        try:
            self._write(result, start, stop)
        except BrokenPipeError:
            self._gone = True
            raise ReaderGone(f"the reader of {self.path or 'stdout'} closed it") from None

    def _write(self, result: Part, start: int, stop: int) -> None:
        if self.fmt == "jsonl":
            if result.columns is None:
                self.stream.write(result.body_rows(start, stop))
            elif start == 0 and stop == len(result):
                self.stream.write(result.records)
                self.stream.write(b"\n")
            else:
                self.stream.write(b"\n".join(result.lines()[start:stop]) + b"\n")
        elif self._parquet is not None:
            self._parquet.write(result, start, stop)
        elif result.columns is None:  # CSV rows rendered where they were solved
            if not self._csv_header:
                self.stream.write(CSV_HEADER.encode())
                self._csv_header = True
            self.stream.write(result.body_rows(start, stop))
        else:
            from pipeline.engine.render.csv_text import render_csv

            self.stream.write(render_csv(result, start, stop, header=not self._csv_header).encode())
            self._csv_header = True
        now = time.monotonic()
        if now - self._flushed >= FLUSH_S:
            self.stream.flush()
            self._flushed = now

    def write_rows(self, rows: bytes) -> None:
        """Write JSON Lines or CSV rows rendered elsewhere (a dataset's part, its CSV header cut off)."""
        if self.fmt == "csv" and not self._csv_header:
            self.stream.write(CSV_HEADER.encode())
            self._csv_header = True
        self.stream.write(rows)

    def parquet_writer(self) -> Any:
        """The Parquet writer of a Parquet output (None for another format): tables are appended to it."""
        return self._parquet

    @property
    def resumable(self) -> bool:
        """True when a collection killed half way can go on writing this output: a regular file, of
        a format whose file can be cut at a record and appended to (not Parquet: its footer)."""
        plain = self._target is not None and self._target.atomic and getattr(self, "_gzip", None) is None
        return plain and self.fmt != "parquet"

    def durable(self) -> dict[str, Any]:
        """Flush (and fsync a file); where the output stands: its part file, final path, durable bytes."""
        if self._target is None:
            self.stream.flush()
            return {"path": None}
        size = self._target.durable()
        return {"path": self._target.final, "part": self._target.part, "bytes": size, "format": self.fmt}

    def close(self, keep: bool) -> None:
        """Flush; a file is renamed into place when `keep` (complete, or interrupted), else removed.

        A pipe whose reader is gone is closed without a flush (there is no one to write to)."""
        if self._gone:
            self._parquet = self._gzip = None
            if self._target is not None:
                target, self._target = self._target, None
                with contextlib.suppress(BrokenPipeError):  # already raised as ReaderGone
                    target.close(keep)
            return
        try:
            self._close(keep)
        except BrokenPipeError:
            self._gone = True
            raise ReaderGone(f"the reader of {self.path or 'stdout'} closed it") from None
        if self._target is None and _reader_left(self.stream):  # every byte fit in the pipe, unread
            self._gone = True
            raise ReaderGone(f"the reader of {self.path or 'stdout'} closed it")

    def _close(self, keep: bool) -> None:
        if self.fmt == "csv" and not self._csv_header and keep:
            from pipeline.engine.render.csv_text import HEADER

            self.stream.write(HEADER.encode())
        if self._parquet is not None:
            parquet, self._parquet = self._parquet, None
            if keep:
                parquet.close()  # the footer: a Parquet file without it cannot be read
        if self._gzip is not None:
            gz, self._gzip = self._gzip, None
            gz.close()  # its trailer; the file below stays open for the target to close
        if self._target is None:
            self.stream.flush()
            return
        target, self._target = self._target, None
        target.close(keep)
