"""The bytes of an input before its lines are read: a path, a URL, stdin or an upload opened and gunzipped,
and a CSV input seen as its puzzle column (`ColumnStream`). `pipeline.engine.reader` reads what these give."""

from __future__ import annotations

import io
import sys
import zlib
from pathlib import Path
from typing import IO, Any

import numpy as np

from pipeline.engine.storage import is_url, storage_for
from solvers.model.entries import unpacked
from solvers.model.parse import MAX_LINE_CHARS, csv_column

SLAB = 1 << 20
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: editors on Windows put it first; not part of a puzzle


def open_input(source: str | Path) -> IO[bytes]:
    """Open a path, a URL (fsspec) or `-` for stdin as bytes, gunzipped when it starts with the gzip magic."""
    if str(source) == "-":
        return unpacked(sys.stdin.buffer)
    if isinstance(source, str) and is_url(source):
        return unpacked(storage_for(source).open_read(source))
    return unpacked(open(source, "rb"))  # noqa: SIM115


class TooLarge(ValueError):
    """An input unpacks to more bytes than its reader takes."""


def read_upload(data: bytes, most: int) -> bytes:
    """The text of an input held in memory (a web upload), unpacked: TooLarge past `most` bytes (never holding
    more than `most` + 1), ValueError (one line) when its gzip is broken or cut short."""
    stream = unpacked(io.BytesIO(data))
    try:
        text = stream.read(most + 1)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise ValueError(f"not valid gzip: {exc}") from None
    if len(text) > most:
        raise TooLarge(f"unpacks to more than {most:,} bytes")
    return text


class Replay(io.RawIOBase):
    """A stream whose first bytes were read already: those, then the rest of the stream, read as it is."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:  # type: ignore[override]
        if self._head:
            out, self._head = bytes(self._head), memoryview(b"")
            return out
        return getattr(self._rest, "read1", self._rest.read)(n if n > 0 else SLAB)

    read1 = read

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._rest.readinto(buffer)  # type: ignore[attr-defined]


def peek_stdin(limit: int) -> tuple[IO[bytes], bool]:
    """Read up to `limit` bytes of stdin; return a stream of all of stdin and whether it all fit."""
    head = sys.stdin.buffer.read(limit + 1)
    if len(head) <= limit:
        return io.BytesIO(head), True
    return io.BufferedReader(Replay(head, sys.stdin.buffer), buffer_size=SLAB), False  # type: ignore[arg-type]


CSV_HEAD = 1 << 16  # bytes of an input read to find its first line: a CSV header is far shorter


def csv_columns(stream: IO[bytes], column: str | None, name: str) -> tuple[IO[bytes], ColumnStream | None]:
    """The input as its reader takes it: through its puzzle column (`ColumnStream`) when its first line is CSV
    header naming it (`csv_field`), as it is otherwise."""
    read = getattr(stream, "read1", stream.read)
    head, more = b"", None
    try:
        head = read(CSV_HEAD)
        more = read(CSV_HEAD) if head and first_line(head) is None and len(head) < CSV_HEAD else None
    except (OSError, EOFError, zlib.error):  # a broken input: its reader meets the error again and says it
        return Replay(head, stream), None  # type: ignore[return-value]
    replay = Replay(head + (more or b""), stream)
    index = csv_field(head + (more or b""), column, name, final=more == b"")  # b"": the input ended
    if index is None:
        return replay, None
    columns = ColumnStream(replay, index, header=True)  # type: ignore[arg-type]
    return columns, columns  # type: ignore[return-value]


def csv_field(head: bytes, column: str | None, name: str, final: bool = False) -> int | None:
    """The field (from 0) holding the puzzles when the first line of `head` (`final`: the whole input) is CSV
    header naming their column (`column`, else a `PUZZLE_COLUMNS`); ValueError when `column` is not named."""
    first = first_line(head, final)
    index = csv_column(first, column) if first is not None else None
    if index is None and column is not None:
        raise ValueError(
            f"{name}: its first line names no column {column!r} (it reads {(first or '')[:80]!r})"
        )
    return index


def check_column(source: str | Path, column: str) -> None:
    """ValueError (one line) when the first line of the input `source` (a path or a URL, gzip or not) is no
    CSV header naming `column`: said before a job starts."""
    with open_input(source) as stream:
        csv_columns(stream, column, str(source))


def first_line(head: bytes, final: bool = False) -> str | None:
    """The first line of `head` neither blank nor a # comment (past a byte-order mark), when it is whole (its
    line end read, or `final`: `head` is the whole input)."""
    pieces = head.removeprefix(BOM).split(b"\n")
    for raw in pieces if final else pieces[:-1]:
        text = raw.decode("utf-8", "replace").strip()
        if text and not text.startswith("#"):
            return text
    return None


class ColumnStream(io.RawIOBase):
    """A CSV input seen as its puzzle column (field `index`; line numbers stay the file's, the header a blank
    line); a line without that field is handed on whole, why kept in `reasons` (an `invalid` record)."""

    def __init__(self, raw: IO[bytes], index: int, header: bool) -> None:
        self.raw = raw
        self.index = index
        self.header = header
        self.reasons: dict[int, str] = {}
        self._carry = b""
        self._out = b""
        self._lines = 0  # lines handed on so far
        self._long = False  # passing a line longer than any puzzle through as it is

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:  # type: ignore[override]
        while not self._out:
            data = self.raw.read(SLAB)
            if not data:
                if not self._carry:
                    return b""
                last, self._carry = self._carry, b""
                self._out = self._cut(last + b"\n")[:-1]  # the last line, without a line end as it came
                break
            self._take(data)
        out = self._out if n is None or n < 0 else self._out[:n]
        self._out = self._out[len(out) :]
        return out

    read1 = read

    def _take(self, data: bytes) -> None:
        if self._long:  # the rest of an over-long line: as it is (the reader answers it "too long")
            end = data.find(b"\n")
            if end < 0:
                self._out = data
                return
            self._out, self._long, self._lines = data[: end + 1], False, self._lines + 1
            data = data[end + 1 :]
        data = self._carry + data
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) > 4 * MAX_LINE_CHARS:
            self._out, self._carry, self._long = self._out + data, b"", True
            return
        self._carry = data[cut:]
        self._out += self._cut(data[:cut]) if cut else b""

    def _cut(self, body: bytes) -> bytes:
        """The puzzle fields of whole lines (`body` ends with a line end)."""
        fast = None if self.header else self._uniform(body)
        if fast is not None:
            return fast
        out = []
        for raw in body.split(b"\n")[:-1]:
            self._lines += 1
            out.append(self._field(raw.rstrip(b"\r")))
        return b"\n".join(out) + b"\n"

    def _field(self, line: bytes) -> bytes:
        text = line.strip()
        if not text or text.startswith(b"#"):
            return line
        if self.header:
            self.header = False
            return b""
        fields = _csv_fields(text)
        field = fields[self.index].strip() if len(fields) > self.index else b""
        if not field:
            what = "is empty" if len(fields) > self.index else f"is missing (the line has {len(fields)})"
            self.reasons[self._lines] = f"the puzzle column (field {self.index + 1}) {what}"
            return text
        return field

    def _uniform(self, body: bytes) -> bytes | None:
        """The fields of a slab of equal lines, commas in the same places and nothing quoted, or None."""
        width = body.find(b"\n") + 1
        if len(body) % width:
            return None
        rows = np.frombuffer(body, dtype=np.uint8).reshape(-1, width)
        commas = np.flatnonzero(rows[0] == 44)
        crlf = width >= 2 and bool((rows[:, width - 2] == 13).all())
        ends = [-1, *commas.tolist(), width - 1 - crlf]
        if len(ends) < self.index + 2 or np.count_nonzero(rows == 44) != len(commas) * len(rows):
            return None
        a, b = ends[self.index] + 1, ends[self.index + 1]
        field = rows[:, a:b]
        if b <= a or not (rows[:, commas] == 44).all() or (rows == 34).any() or (rows[:, 0] == 35).any():
            return None
        if not (field > 32).all():  # a space or a control byte: the line by line way strips and checks
            return None
        out = np.empty((len(rows), b - a + 1), dtype=np.uint8)
        out[:, :-1] = field
        out[:, -1] = 10
        self._lines += len(rows)
        return out.tobytes()


def _csv_fields(text: bytes) -> list[bytes]:
    """The fields of a CSV line: split at commas, or by the csv module when something is quoted."""
    if b'"' not in text:
        return text.split(b",")
    import csv

    row = next(csv.reader([text.decode("utf-8", "replace")]), [])
    return [f.encode("utf-8") for f in row]
