"""The producer's reader: `read_entries`' semantics at a small fraction of its cost per line.

`solvers.model.parse.read_entries` checks each puzzle alone (~180 µs for a 9x9 line), more
than solving an easy puzzle takes. Here a file is read in ~1 MB slabs: a slab of
equal-length plain lines (the shape of every big corpus) is checked as one numpy array
with no Python work per line. Anything else (blank or `#` lines, rows of a multi-row
grid, integer notation, a rejected line) follows `read_entries`' rules line by line,
and a line the fast check rejects is re-parsed by `parse_puzzle` for its reason.
`tests/test_pipeline_reader.py` holds the two readers to the same output.
"""

from __future__ import annotations

import codecs
import gzip
import io
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, overload

import numpy as np

from pipeline.engine.checks import cells_ok, compact_ok
from pipeline.engine.storage import is_url, storage_for
from solvers.model.parse import (
    CR_INSIDE,
    MAX_LINE_CHARS,
    csv_column,
    infer_box,
    parse_puzzle,
    row_side,
    split_tokens,
    too_long,
)
from solvers.model.puzzle import ALPHABET, Box, PuzzleError, as_box

SLAB = 1 << 20
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: editors on Windows put it first; not part of a puzzle


@dataclass
class Block:
    """Consecutive puzzles of one input: start lines, texts, and None or why each is invalid."""

    lines: Sequence[int] = field(default_factory=list)
    texts: Sequence[str] = field(default_factory=list)
    errors: Sequence[str | None] = field(default_factory=list)
    all_valid: bool = False  # set when every error is None (lets the producer skip a scan)

    def __len__(self) -> int:
        return len(self.texts)


class SlabTexts(Sequence[str]):
    """The texts of a slab of equal-length lines, held as one string (lines joined by newlines): a line
    becomes a str of its own only when it is read. The producer sends such runs of lines on as they are."""

    __slots__ = ("text", "length", "count")

    def __init__(self, text: str, length: int, count: int) -> None:
        self.text = text  # `count` lines of `length` characters, joined by "\n"
        self.length = length
        self.count = count

    def __len__(self) -> int:
        return self.count

    def joined(self, start: int = 0, stop: int | None = None) -> str:
        """Lines `start:stop` joined by newlines (a slice of the text: no str per line)."""
        stop = self.count if stop is None else stop
        width = self.length + 1
        return self.text[start * width : stop * width - 1] if stop > start else ""

    def __iter__(self) -> Iterator[str]:
        return iter(self.text.split("\n") if self.count else ())

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            start, stop, step = i.indices(self.count)
            if step != 1:
                return [self[k] for k in range(start, stop, step)]
            return self.joined(start, stop).split("\n") if stop > start else []
        k = range(self.count)[i]
        return self.text[k * (self.length + 1) : k * (self.length + 1) + self.length]


def read_blocks(
    source: str | Path | IO[bytes] | Iterable[str],
    box: Box | str | None = None,
    *,
    check: bool = True,
    column: str | None = None,
) -> Iterator[Block]:
    """Yield the puzzles of an input in order, streaming: a path (`-` for stdin), a binary
    stream (gzip or not), or an iterable of strings (one line each).

    Same entries as `read_entries` (line, text, verdict); blank and `#` lines are skipped.
    Empty blocks come between them, at least one per slab read (~1 MB): a consumer that beats
    while it reads (the producer) keeps beating through gigabytes of blank lines.

    `check` False leaves the one-line compact puzzles unchecked (their verdict None; a slab
    of them comes as `SlabTexts`): the solver that parses them checks them anyway (`solve_many`
    answers a bad symbol or clashing givens `invalid` with the same reason), so the pipeline
    checks each puzzle once, where it is parsed, not also here.

    A CSV file whose first line names its puzzle column (`column`, else one of `PUZZLE_COLUMNS`) is read as
    that column (`ColumnStream`): the header is skipped as a comment is, the other fields are ignored.
    ValueError (one line) when `column` is given and the first line does not name it.
    """
    state = _LineReader(as_box(box), check=check)
    if hasattr(source, "read"):
        yield from _read_csv(unpacked(source), state, column, "the input")  # type: ignore[arg-type]
        return
    if not isinstance(source, (str, Path)):
        for n, text in enumerate(source, start=1):
            state.feed(n, (text.removeprefix("\ufeff") if n == 1 else text).rstrip("\r\n"), None)
            if len(state.block) >= 4096:
                yield state.take()
        yield from state.finish()
        return
    stream = _open(source)
    try:
        yield from _read_csv(stream, state, column, str(source))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _read_csv(stream: IO[bytes], state: _LineReader, column: str | None, name: str) -> Iterator[Block]:
    """`_read_stream` of an input, through its puzzle column when it is CSV (`csv_columns`)."""
    stream, columns = csv_columns(stream, column, name)
    yield from _answered(_read_stream(stream, state), columns)


def _open(source: str | Path) -> IO[bytes]:
    """Open a path, a URL (`pipeline.engine.storage`: fsspec) or `-` for stdin as bytes, gunzipping when it
    starts
    with the gzip magic."""
    if str(source) == "-":
        return unpacked(sys.stdin.buffer)
    if isinstance(source, str) and is_url(source):
        return unpacked(storage_for(source).open_read(source))
    return unpacked(open(source, "rb"))  # noqa: SIM115


def unpacked(raw: IO[bytes]) -> IO[bytes]:
    """A binary stream's input bytes: through a gzip reader (every member of a `cat a.gz b.gz`)
    when it starts with the gzip magic, as is otherwise. The one reader of files, stdin, streams
    and web uploads (`read_upload`)."""
    if not hasattr(raw, "peek"):  # BytesIO and raw streams: buffered, so the magic can be peeked
        raw = io.BufferedReader(raw, buffer_size=SLAB)  # type: ignore[arg-type, type-var]
    head = raw.peek(2)[:2]  # type: ignore[attr-defined]
    return gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw  # type: ignore[return-value]


class TooLarge(ValueError):
    """An input unpacks to more bytes than its reader takes."""


def read_upload(data: bytes, most: int) -> bytes:
    """The text of an input held in memory (a web upload), unpacked as `read_blocks` unpacks a file:
    TooLarge past `most` bytes (never holding more than `most` + 1 of them), ValueError (one line)
    when its gzip is broken or cut short."""
    stream = unpacked(io.BytesIO(data))
    try:
        text = stream.read(most + 1)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise ValueError(f"not valid gzip: {exc}") from None
    if len(text) > most:
        raise TooLarge(f"unpacks to more than {most:,} bytes")
    return text


class _Prefixed(io.RawIOBase):
    """A raw stream that replays bytes already read, then continues with the rest of a stream."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

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
    return io.BufferedReader(_Prefixed(head, sys.stdin.buffer), buffer_size=SLAB), False  # type: ignore[arg-type]


def _read_stream(stream: IO[bytes], state: _LineReader, opening: bool = True) -> Iterator[Block]:
    """Read slabs ending at a newline; check uniform slabs at once, the rest line by line.

    A byte-order mark opening the input is skipped (`opening`: the stream starts the input; a split
    of it starting later does not). A line longer than HOLD bytes is not held (`_LongLine`: its head
    kept, the rest counted and checked as it streams by). A slab of nothing but line ends is skipped
    whole (blank lines give no entry).
    """
    read = getattr(stream, "read1", stream.read)
    carry = b""
    done = 0  # lines consumed so far
    long: _LongLine | None = None  # the over-long line being read past, if any
    while True:
        try:
            data = read(SLAB)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            state.feed(done + 1, None, f"the file cannot be read further: {exc}")
            break
        if long is not None:
            end = data.find(b"\n")
            long.skip(data if end < 0 else data[:end])
            if data and end < 0:
                yield Block()  # a tick: the consumer (the producer's heartbeat) knows the reading goes on
                continue
            state.feed(done + 1, *long.verdict())
            done, long, data = done + 1, None, data[end + 1 :]
            if end < 0:
                break  # the input ends with the long line
        elif not data:
            yield from state.flush_lines(done, carry.removeprefix(BOM) if opening else carry)
            break
        data = carry + data
        if opening:
            if len(data) < len(BOM) and BOM.startswith(data):
                carry = data
                continue
            data, opening = data.removeprefix(BOM), False
        cut = data.rfind(b"\n") + 1
        if cut == 0:  # no line end yet: keep reading, holding at most HOLD bytes of a line
            long, carry = (_LongLine(data), b"") if len(data) > HOLD else (None, data)
            yield Block()  # a tick
            continue
        body, carry = data[:cut], data[cut:]
        width = body.find(b"\n") + 1  # a uniform slab's lines are all this wide: no count needed
        fast = state.uniform(body, len(body) // width, done) if len(body) % width == 0 else None
        count = len(fast) if fast is not None else body.count(b"\n")
        if fast is None and count + body.count(b"\r") == len(body):  # only line ends
            yield Block()  # only empty lines (a gzip of gigabytes of newlines): nothing to parse, a tick
        elif fast is not None:
            yield from state.pending()
            yield fast
        else:
            ticked = False
            for block in state.flush_lines(done, body):
                ticked = True
                yield block
            if not ticked:
                yield Block()  # blank lines, comments or a grid's first rows: no puzzle yet, a tick
        done += count
    yield from state.finish()


HOLD = 4 * MAX_LINE_CHARS  # bytes of one line held at most: a longer line has more characters than allowed


class _LongLine:
    """A line longer than HOLD bytes, so longer than MAX_LINE_CHARS characters whatever they are: its first
    characters are kept for its record, the rest counted and checked as UTF-8 as it streams by, so its
    verdict (too long, or not UTF-8 text) and length are `read_entries`' wherever reads or splits cut it."""

    def __init__(self, data: bytes) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.head = ""  # the line's first 200 characters
        self.chars = 0  # characters counted so far
        self.crs = 0  # carriage returns ending what was counted (the line's last ones are no characters)
        self.bad = False
        self.skip(data)

    def skip(self, data: bytes, final: bool = False) -> None:
        """Count the next bytes of the line."""
        if self.bad:
            return
        try:
            text = self.decoder.decode(data, final)
        except UnicodeDecodeError:
            self.bad = True
            return
        if len(self.head) < 200:
            self.head += text[: 200 - len(self.head)]
        kept = len(text.rstrip("\r"))
        self.crs = self.crs + len(text) if not kept else len(text) - kept
        self.chars += len(text)

    def verdict(self) -> tuple[str | None, str | None, int]:
        """The arguments of `_LineReader.feed` for the line, once its end was reached: (text held, why it is
        bad, characters not held)."""
        self.skip(b"", final=True)
        if self.bad:
            return None, "the line is not UTF-8 text", 0
        length = self.chars - self.crs  # without its last carriage returns, as `read_entries` strips them
        return self.head[:length], None, max(0, length - len(self.head))


def read_lines(
    stream: IO[bytes],
    box: Box | str | None = None,
    *,
    opening: bool = True,
    rows: bool = True,
    column: int | None = None,
) -> Iterator[Block]:
    """`read_blocks` of a stream of plain lines (no gzip): `opening` when it starts the input (a byte-order
    mark is skipped), `rows` False for a split of an input (a row of a grid written over several lines is
    answered `invalid`: the grid may have started in the split before); `column`: the field of a CSV input
    holding the puzzles (its header, the input's first line, is skipped when `opening`)."""
    columns = None
    if column is not None:
        columns = ColumnStream(stream, column, header=opening)
        stream = columns  # type: ignore[assignment]
    yield from _answered(_read_stream(stream, _LineReader(as_box(box), rows), opening), columns)


CSV_HEAD = 1 << 16  # bytes of an input read to find its first line: a CSV header is far shorter


def csv_columns(stream: IO[bytes], column: str | None, name: str) -> tuple[IO[bytes], ColumnStream | None]:
    """The input as its reader takes it: through its puzzle column (`ColumnStream`) when its first line (past
    a byte-order mark, blank and # lines) is a CSV header naming it (`column`, any case, else one of
    `solvers.model.parse.PUZZLE_COLUMNS`), as it is otherwise. ValueError (one line) when `column` is not
    named."""
    read = getattr(stream, "read1", stream.read)
    head, more = b"", None
    try:
        head = read(CSV_HEAD)
        more = read(CSV_HEAD) if head and first_line(head) is None and len(head) < CSV_HEAD else None
    except (OSError, EOFError, zlib.error):  # a broken input: its reader meets the error again and says it
        return _Replay(head, stream), None  # type: ignore[return-value]
    replay = _Replay(head + (more or b""), stream)
    index = csv_field(head + (more or b""), column, name, final=more == b"")  # b"": the input ended
    if index is None:
        return replay, None
    columns = ColumnStream(replay, index, header=True)  # type: ignore[arg-type]
    return columns, columns  # type: ignore[return-value]


def csv_field(head: bytes, column: str | None, name: str, final: bool = False) -> int | None:
    """The field (from 0) holding the puzzles when the first line of `head` (the input's first bytes; `final`:
    all of it) is a CSV header naming their column (`column`, else one of `PUZZLE_COLUMNS`); None for any
    other input. ValueError (one line, naming the input `name`) when `column` is given and not named."""
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
    stream = _open(source)
    try:
        csv_columns(stream, column, str(source))
    finally:
        stream.close()


def first_line(head: bytes, final: bool = False) -> str | None:
    """The first line of `head` neither blank nor a # comment (past a byte-order mark), when it is whole (its
    line end read, or `final`: `head` is the whole input)."""
    pieces = head.removeprefix(BOM).split(b"\n")
    for raw in pieces if final else pieces[:-1]:
        text = raw.decode("utf-8", "replace").strip()
        if text and not text.startswith("#"):
            return text
    return None


class _Replay(io.RawIOBase):
    """A stream whose first bytes were read already: those, then the rest of the stream, read as it is."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = getattr(rest, "read1", rest.read)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:  # type: ignore[override]
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._rest(n if n > 0 else SLAB)

    read1 = read


class ColumnStream(io.RawIOBase):
    """A CSV input seen as its puzzle column: each line becomes its field `index` (its line end kept, so line
    numbers stay the file's), the header line (`header`: the first that is neither blank nor a comment) a
    blank one, skipped as comments are. A line without that field is handed on whole and why is kept
    (`reasons`, by line number) for `_answered`: it becomes an `invalid` record, never silently dropped. A
    slab of equal lines with their commas in the same places is cut with numpy, without Python per line."""

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


def _answered(blocks: Iterable[Block], columns: ColumnStream | None) -> Iterator[Block]:
    """The blocks of a reader, each line a CSV input could not give a puzzle field for answered with why."""
    for block in blocks:
        reasons = columns.reasons if columns is not None else None
        if reasons:
            hit = [k for k, line in enumerate(block.lines) if line in reasons]
            if hit:
                block = Block(list(block.lines), list(block.texts), list(block.errors))
                for k in hit:
                    block.errors[k] = reasons.pop(block.lines[k])  # type: ignore[index]
        yield block


def has_grid_rows(head: bytes, box: Box | str | None = None) -> bool:
    """True when a line of `head` is a row of a grid written over several lines (one puzzle per line is
    what splits need)."""
    state = _LineReader(as_box(box))
    if not any(sep in head for sep in (b" ", b",", b";", b"\t", b"#")):  # plain symbols: a kind per length
        lengths = {len(raw.rstrip(b"\r")) for raw in head.split(b"\n")}
        return any(n and state.kind(n)[0] == "row" for n in lengths)
    for raw in head.split(b"\n"):
        s = raw.decode("utf-8", "replace").strip()
        if s and s[0] != "#" and state.line_kind(s)[1][0] == "row":
            return True
    return False


ROW_IN_SPLIT = (
    "a row of a grid written over several lines, in an input read in splits (one puzzle per line): "
    "solve this input with --no-splits"
)


class _LineReader:
    """`read_entries`' line-by-line state machine, plus the slab fast path.

    `rows`: False for a split of an input (`pipeline.engine.splits`), where a grid written over several
    lines could start in the split before: each such row is answered `invalid`, saying why, instead
    of being joined to the wrong rows. `check`: False leaves one-line compact puzzles to the
    solver's parse (`read_blocks`).
    """

    def __init__(self, box: Box | None, rows: bool = True, check: bool = True) -> None:
        self.box = box
        self.rows_allowed = rows
        self.check = check  # False: one-line compact puzzles are left to the solver's parse
        self.kinds: dict[int, tuple[str, object]] = {}
        self.block = Block()
        self.fast: dict[Box, list[int]] = {}  # positions in `block` awaiting the vectorised check
        self.rows: list[str] = []
        self.start = self.side = 0

    def kind(self, length: int) -> tuple[str, object]:
        """Classify a line of `length` cells: a row of a grid, a whole grid of a known box, or other."""
        found = self.kinds.get(length)
        if found is None:
            found = self.kinds[length] = _classify(length, self.box)
        return found

    def line_kind(self, s: str) -> tuple[bool, tuple[str, object]]:
        """Whether a stripped line is plain symbols (no separators), and its kind (`kind`)."""
        plain = s.isascii() and s.isprintable() and " " not in s and "," not in s and ";" not in s
        return plain, self.kind(len(s) if plain else len(split_tokens(s)[0]))

    def uniform(self, body: bytes, count: int, done: int) -> Block | None:
        """Return the slab (`count` lines, if it is uniform) as one Block when it is all equal-length plain
        lines, checked unless `check` is off; else None. A line break inside a line is no symbol: a Block
        returned holds exactly `count` lines."""
        if self.rows or count == 0 or len(body) % count:
            return None
        width = len(body) // count
        crlf = width >= 2 and body[width - 2] == 13
        length = width - 1 - crlf
        kind, grid_box = self.kind(length)
        if kind != "whole" or length == 0:
            return None
        arr = np.frombuffer(body, dtype=np.uint8).reshape(count, width)
        if not (arr[:, -1] == 10).all() or (crlf and not (arr[:, -2] == 13).all()):
            return None
        if self.check and not cells_ok(arr[:, :length], grid_box).all():  # type: ignore[arg-type]
            return None
        if not self.check and not _plain_lines(body, arr[:, :length]):
            return None
        text = body.decode("ascii")
        if crlf:
            text = text.replace("\r\n", "\n")
        slab = SlabTexts(text[:-1], length, count)
        return Block(range(done + 1, done + count + 1), slab, [None] * count, all_valid=True)

    def flush_lines(self, done: int, body: bytes) -> Iterator[Block]:
        """Feed a slab line by line (decoding each), yielding full blocks."""
        if not body:
            return
        raw_lines = body.split(b"\n")
        if raw_lines[-1] == b"":
            raw_lines.pop()
        for k, raw in enumerate(raw_lines, start=done + 1):
            try:
                self.feed(k, raw.decode("utf-8").rstrip("\r\n"), None)
            except UnicodeDecodeError:
                self.feed(k, None, "the line is not UTF-8 text")
            if len(self.block) >= 4096:
                yield self.take()

    def feed(self, n: int, text: str | None, bad: str | None, dropped: int = 0) -> None:
        """Take one input line, as `read_entries` does (`dropped`: its characters not held)."""
        if bad is not None or text is None:
            self._flush_rows()
            self._add(n, "", bad)
            return
        if len(text) + dropped > MAX_LINE_CHARS:
            self._flush_rows()
            self._add(n, text[:200], too_long(len(text) + dropped, text))
            return
        s = text.strip()
        if "\r" in s:  # a carriage return ends no line: CR-only line ends are answered, never skipped
            self._flush_rows()
            self._add(n, s[:200], CR_INSIDE)
            return
        if not s or s[0] == "#":
            return
        plain, (kind, arg) = self.line_kind(s)
        if kind == "row" and not self.rows_allowed:
            self._add(n, s, ROW_IN_SPLIT)
            return
        if kind == "row":
            if not self.rows:
                self.start, self.side = n, int(arg)  # type: ignore[call-overload]
            self.rows.append(s)
            if len(self.rows) == self.side:
                grid = "\n".join(self.rows)
                self.rows = []
                self._add(self.start, grid, _verdict(grid, self.box))
            return
        self._flush_rows()
        if plain and kind == "whole":
            self.fast.setdefault(arg, []).append(len(self.block))  # type: ignore[arg-type]
            self._add(n, s, None)
        else:
            self._add(n, s, _verdict(s, self.box))

    def _add(self, line: int, text: str, error: str | None) -> None:
        self.block.lines.append(line)  # type: ignore[attr-defined]
        self.block.texts.append(text)
        self.block.errors.append(error)

    def _flush_rows(self) -> None:
        if self.rows:
            self._add(
                self.start,
                "\n".join(self.rows),
                f"the grid starting here has {len(self.rows)} of its {self.side} rows",
            )
            self.rows = []

    def take(self) -> Block:
        """Check the fast-lane lines of the current block and hand it over."""
        block = self.block
        for grid_box, positions in self.fast.items() if self.check else ():
            texts = [block.texts[p] for p in positions]
            ok = compact_ok(texts, grid_box)
            for p, good in zip(positions, ok.tolist(), strict=True):
                if not good:
                    block.errors[p] = _verdict(block.texts[p], self.box)
        self.block, self.fast = Block(), {}
        return block

    def pending(self) -> Iterator[Block]:
        """Yield the current block if it holds anything (before a fast slab, to keep order)."""
        if len(self.block):
            yield self.take()

    def finish(self) -> Iterator[Block]:
        """Close an unfinished multi-row grid and yield what is left."""
        self._flush_rows()
        yield from self.pending()


def _plain_lines(body: bytes, cells: np.ndarray) -> bool:
    """Whether every line of a slab (`cells`: its lines' characters, uint8[count, length]) is one plain
    token, as `_LineReader.feed` would read it: printable ASCII, no space, comma or semicolon, no `#`
    opening it (a comment). Then the slab is puzzles one per line, whatever their symbols."""
    if b"," in body or b";" in body or (cells[:, 0] == 35).any():
        return False
    return bool(cells.min() > 32 and cells.max() < 127)


def _classify(length: int, box: Box | None) -> tuple[str, object]:
    side = row_side(length, box)
    if side is not None:
        return "row", side
    try:
        grid_box = infer_box(length, box)
    except PuzzleError:
        return "other", None
    return ("whole", grid_box) if grid_box.n <= len(ALPHABET) else ("other", None)


def _verdict(text: str, box: Box | None) -> str | None:
    """Parse one puzzle the slow way: None when it is a puzzle, else the reason."""
    try:
        parse_puzzle(text, box)
    except PuzzleError as exc:
        return str(exc)
    return None
