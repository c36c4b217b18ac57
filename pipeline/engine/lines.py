"""`read_entries`' line-by-line rules for the producer's reader: the blocks it yields (`Block`, `SlabTexts`)
and the state machine (`LineReader`) with its fast path, a slab of equal plain lines checked as one array."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from pipeline.engine.checks import cells_ok, compact_ok
from solvers.model.parse import (
    CR_INSIDE,
    MAX_LINE_CHARS,
    infer_box,
    parse_puzzle,
    row_side,
    split_tokens,
    too_long,
)
from solvers.model.puzzle import ALPHABET, Box, PuzzleError, as_box


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


def has_grid_rows(head: bytes, box: Box | str | None = None) -> bool:
    """True when a line of `head` is a row of a grid written over several lines (one puzzle per line is
    what splits need)."""
    state = LineReader(as_box(box))
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


class LineReader:
    """`read_entries`' line-by-line state machine, plus the slab fast path. `rows` False (a split): a grid's
    row answered `invalid`, never joined to the wrong rows; `check` False: compact lines left to solvers."""

    def __init__(self, box: Box | None, rows: bool = True, check: bool = True) -> None:
        self.box = box
        self.rows_allowed = rows
        self.check = check
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
        """The slab (`count` lines) as one Block of exactly `count` lines when it is all equal-length plain
        lines, checked unless `check` is off; else None."""
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
            why = f"the grid starting here has {len(self.rows)} of its {self.side} rows"
            self._add(self.start, "\n".join(self.rows), why)
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
    """Whether every line of a slab (`cells`: uint8[count, length]) is one plain token as `LineReader.feed`
    reads it: printable ASCII, no space, comma or semicolon, no opening `#`."""
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
