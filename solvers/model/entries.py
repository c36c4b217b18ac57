"""Reading a whole input as entries: every puzzle of a file, stdin or lines, each an `Entry` holding the
puzzle or why it is not one, named by line (`parse_puzzle` reads each; `pipeline.engine.reader` is the fast
reader with the same verdicts)."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from solvers.model.parse import CR_INSIDE, MAX_LINE_CHARS, parse_puzzle, row_side, split_tokens, too_long
from solvers.model.puzzle import Box, Puzzle, PuzzleError, as_box

BOM = "\ufeff"  # a byte-order mark, as the first line decodes it


@dataclass(frozen=True, slots=True)
class Entry:
    """One puzzle of an input: where it starts, its text, and the puzzle or the reason."""

    line: int  # 1-based line of the input where the puzzle starts
    text: str
    puzzle: Puzzle | None = None
    error: str | None = None

    @property
    def message(self) -> str:
        """Return the error as a user reads it: `line 17: row 3 has two 5s`."""
        return f"line {self.line}: {self.error}"


def unpacked(raw: IO[bytes]) -> IO[bytes]:
    """A binary stream's input bytes: through a gzip reader (every member) when it starts with the gzip magic,
    as is otherwise: the one reader of files, stdin, streams and web uploads."""
    if not hasattr(raw, "peek"):  # BytesIO and raw streams: buffered, so the magic can be peeked
        raw = io.BufferedReader(raw, buffer_size=1 << 20)  # type: ignore[arg-type, type-var]
    head = raw.peek(2)[:2]  # type: ignore[attr-defined]
    return gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw  # type: ignore[return-value]


def iter_lines(source: str | Path | Iterable[str]) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, decode error) for a path, `-`, or an iterable of strings; a
    byte-order mark opening the input is skipped (editors on Windows write one)."""
    if isinstance(source, (str, Path)):
        stream = unpacked(sys.stdin.buffer if str(source) == "-" else open(source, "rb"))  # noqa: SIM115
        try:
            n = 0
            try:
                for n, raw in enumerate(stream, start=1):
                    try:
                        text = raw.decode("utf-8").rstrip("\r\n")
                        yield n, text.removeprefix(BOM) if n == 1 else text, None
                    except UnicodeDecodeError:
                        yield n, None, "the line is not UTF-8 text"
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                yield n + 1, None, f"the file cannot be read further: {exc}"
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
        return
    for n, text in enumerate(source, start=1):
        yield n, (text.removeprefix(BOM) if n == 1 else text).rstrip("\r\n"), None


def read_entries(source: str | Path | Iterable[str], box: Box | str | None = None) -> Iterator[Entry]:
    """Yield every puzzle of an input as an Entry, streaming: a line holds a whole puzzle, or one row of a
    grid written a row per line (gathered until the grid is full); blank and `#` lines are skipped."""
    box = as_box(box)
    pending: list[str] = []
    start = 0
    side = 0
    for n, text, bad in iter_lines(source):
        refused = _refused(text, bad)
        stripped = text.strip() if refused is None and text is not None else ""
        if refused is None and (not stripped or stripped.startswith("#")):
            continue
        row = row_side(len(split_tokens(stripped)[0]), box) if refused is None else None
        if row is not None:
            if not pending:
                start, side = n, row
            pending.append(stripped)
            if len(pending) == side:
                yield _entry(start, "\n".join(pending), box)
                pending = []
            continue
        if pending:
            yield _partial(start, pending, side)
            pending = []
        yield _entry(n, stripped, box) if refused is None else Entry(n, refused[0], error=refused[1])
    if pending:
        yield _partial(start, pending, side)


def _refused(text: str | None, bad: str | None) -> tuple[str, str | None] | None:
    """(text kept, reason) of a line refused before it is parsed: unreadable, too long, a carriage return
    inside (it ends no line: CR-only line ends are answered, not skipped); None for any other line."""
    if bad is not None or text is None:
        return "", bad
    if len(text) > MAX_LINE_CHARS:
        return text[:200], too_long(len(text), text)
    return (text.strip()[:200], CR_INSIDE) if "\r" in text.strip() else None


def _entry(line: int, text: str, box: Box | None) -> Entry:
    try:
        return Entry(line, text, puzzle=parse_puzzle(text, box))
    except PuzzleError as exc:
        return Entry(line, text, error=str(exc))


def _partial(start: int, rows: list[str], side: int) -> Entry:
    return Entry(start, "\n".join(rows), error=f"the grid starting here has {len(rows)} of its {side} rows")
