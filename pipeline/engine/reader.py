"""The producer's reader: `read_entries`' semantics at a fraction of its cost per line, a slab of equal plain
lines checked as one numpy array, anything else line by line (`pipeline.engine.lines`)."""

from __future__ import annotations

import codecs
import gzip
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from pipeline.engine.inputs import BOM, SLAB, ColumnStream, csv_columns, open_input
from pipeline.engine.lines import Block, LineReader
from solvers.model.entries import unpacked
from solvers.model.parse import MAX_LINE_CHARS
from solvers.model.puzzle import Box, as_box


def read_blocks(
    source: str | Path | IO[bytes] | Iterable[str],
    box: Box | str | None = None,
    *,
    check: bool = True,
    column: str | None = None,
) -> Iterator[Block]:
    """Yield the puzzles of an input (a path, `-`, a binary stream or an iterable of lines) in order, as
    `read_entries` does; an empty block at least once a slab, so a consumer that beats while it reads keeps
    beating through gigabytes of blank lines. A CSV input is read as its puzzle column (`csv_columns`)."""
    state = LineReader(as_box(box), check=check)
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
    stream = open_input(source)
    try:
        yield from _read_csv(stream, state, column, str(source))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _read_csv(stream: IO[bytes], state: LineReader, column: str | None, name: str) -> Iterator[Block]:
    """`_read_stream` of an input, through its puzzle column when it is CSV (`csv_columns`)."""
    stream, columns = csv_columns(stream, column, name)
    yield from _answered(_read_stream(stream, state), columns)


def _read_stream(stream: IO[bytes], state: LineReader, opening: bool = True) -> Iterator[Block]:
    """Read slabs ending at a newline; check uniform slabs at once, the rest line by line. A byte-order mark
    opening the input (`opening`) is skipped; a line longer than HOLD bytes is not held (`_LongLine`)."""
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
    """A line longer than HOLD bytes (so too long whatever its characters): its head kept for its record, the
    rest counted and checked as UTF-8 as it streams by, so its verdict is `read_entries`' wherever cut."""

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
        """The arguments of `LineReader.feed` for the line, once its end was reached: (text held, why it is
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
    column: int | None = None,
) -> Iterator[Block]:
    """`read_blocks` of a split's plain lines (no gzip): `opening` when it starts the input; a grid's row is
    answered `invalid` (the grid may have started before the split); `column`: a CSV field."""
    columns = None
    if column is not None:
        columns = ColumnStream(stream, column, header=opening)
        stream = columns  # type: ignore[assignment]
    yield from _answered(_read_stream(stream, LineReader(as_box(box), rows=False), opening), columns)


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
