"""Where records go: a file or stdout, as JSON Lines, CSV or Parquet (`pipeline.engine.render` renders them).

A regular file is renamed into place when the job completes or is interrupted (a Parquet file with its
footer), so a crashed `collect` leaves no half file; a FIFO or a device is written through (`client.target`).
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
from pipeline.contract.formats import FORMATS, check_format
from pipeline.contract.part import Part
from pipeline.engine.render import read_file, rows, sink
from pipeline.engine.render.record import Record

__all__ = ["Output", "Record"]


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
        self.fmt = check_format(fmt)
        self.format = FORMATS[fmt]
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
        self._headed = resume is not None and length > 0  # a resumed file has its header
        self._gone = False  # the reader of a pipe closed it: nothing more can be written
        self._sink = sink(fmt, self.stream)  # Parquet's writer: a row group per slice, the footer at close
        self._flushed = time.monotonic()

    def write(self, result: Part, start: int, stop: int) -> None:
        """Write records `start:stop` of a part, flushed at least every FLUSH_S (a FIFO's or `tail -f`'s
        reader sees results as they come): copied as rendered, or rendered here from columns; FormatMismatch
        for a part rendered in another format, ReaderGone when the reader of a pipe closed it (`| head`)."""
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
        if self._sink is not None:
            self._sink.write(result, start, stop)
        else:
            self._head()
            for piece in rows(result, start, stop, self.fmt):
                self.stream.write(piece)
        now = time.monotonic()
        if now - self._flushed >= FLUSH_S:
            self.stream.flush()
            self._flushed = now

    def _head(self) -> None:
        """The format's header, once, before the first record (or in a file of none)."""
        if not self._headed:
            if self.format.header:
                self.stream.write(self.format.header)
            self._headed = True

    def write_file(self, data: bytes) -> None:
        """Append the records of a dataset's part file of this output's format (its header dropped)."""
        if self._sink is not None:
            self._sink.write_table(read_file(self.fmt, data))
            return
        self._head()
        self.stream.write(memoryview(data)[len(self.format.header) :])

    @property
    def resumable(self) -> bool:
        """True when a collection killed half way can go on writing this output: a regular file, of
        a format whose file can be cut at a record and appended to (not Parquet: its footer)."""
        plain = self._target is not None and self._target.final is not None and self._gzip is None
        return plain and self.format.lines

    def durable(self) -> dict[str, Any]:
        """Flush (and fsync a file); where the output stands: its part file, final path, durable bytes."""
        if self._target is None:
            self.stream.flush()
            return {"path": None}
        size = self._target.durable()
        return {"path": self._target.final, "part": self._target.part, "bytes": size, "format": self.fmt}

    def commit(self) -> None:
        """Nothing more: a file is put in place by `close` (a dataset's output commits here)."""

    def close(self, keep: bool) -> None:
        """Flush; a file is renamed into place when `keep` (complete, or interrupted), else removed; a pipe
        whose reader is gone is closed without a flush (there is no one to write to)."""
        if self._gone:
            self._sink = self._gzip = None
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
        if keep and self._sink is None:
            self._head()
        if self._sink is not None:
            writer, self._sink = self._sink, None
            if keep:
                writer.close()  # the footer: a Parquet file without it cannot be read
        if self._gzip is not None:
            gz, self._gzip = self._gzip, None
            gz.close()  # its trailer; the file below stays open for the target to close
        if self._target is None:
            self.stream.flush()
            return
        target, self._target = self._target, None
        target.close(keep)
