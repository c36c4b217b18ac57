"""Texts of consecutive rows as one UTF-8 byte buffer with offsets: how `ResultColumns` holds its text
columns, so the wire sends them and the renderers read them without a str per row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Texts:
    """Texts of consecutive rows as one UTF-8 buffer and byte offsets (row i: buf[off[i]:off[i+1]])."""

    buf: np.ndarray  # uint8
    off: np.ndarray  # uint64[n+1]

    @classmethod
    def of(cls, texts: Sequence[str]) -> Texts:
        """Concatenate texts as UTF-8 bytes with their byte offsets."""
        joined = "".join(texts).encode()
        off = np.zeros(len(texts) + 1, np.uint64)
        np.cumsum(np.fromiter(map(len, texts), np.uint64, len(texts)), out=off[1:])
        if int(off[-1]) != len(joined):  # not all ASCII: offsets in bytes, not characters
            np.cumsum(np.fromiter((len(t.encode()) for t in texts), np.uint64, len(texts)), out=off[1:])
        return cls(np.frombuffer(joined, dtype=np.uint8), off)

    @classmethod
    def empty(cls, n: int) -> Texts:
        """n empty texts."""
        return cls(np.zeros(0, np.uint8), np.zeros(n + 1, np.uint64))

    @classmethod
    def of_block(cls, symbols: np.ndarray, has: np.ndarray | None = None) -> Texts:
        """Texts of a block of ASCII symbols (u8[n, width]): row i is its row where `has` (None: every
        row), else empty."""
        n, width = symbols.shape
        if has is None or has.all():
            off = np.arange(0, (n + 1) * width, width, dtype=np.uint64)
            return cls(np.ascontiguousarray(symbols).reshape(-1), off)
        off = np.zeros(n + 1, np.uint64)
        np.cumsum(has.astype(np.uint64) * np.uint64(width), out=off[1:])
        return cls(np.ascontiguousarray(symbols[has]).reshape(-1), off)

    def __len__(self) -> int:
        return int(self.off.shape[0]) - 1

    def slice(self, start: int, stop: int) -> Texts:
        """Rows `start:stop` (views of the same buffer, offsets made relative)."""
        off = self.off[start : stop + 1]
        base = off[0] if off.size else np.uint64(0)
        return Texts(self.buf[int(base) : int(off[-1])] if off.size else self.buf[:0], off - base)

    def take(self, rows: np.ndarray) -> Texts:
        """Rows `rows` (increasing positions), copied into a buffer of their own."""
        starts, ends = self.off[rows], self.off[rows + 1]
        off = np.zeros(len(rows) + 1, np.uint64)
        np.cumsum(ends - starts, out=off[1:])
        gather = np.repeat(
            starts.astype(np.int64) - off[:-1].astype(np.int64), (ends - starts).astype(np.int64)
        )
        return Texts(self.buf[gather + np.arange(int(off[-1]), dtype=np.int64)], off)

    def to_list(self, start: int = 0, stop: int | None = None) -> list[str]:
        """Rows `start:stop` as str."""
        stop = len(self) if stop is None else stop
        off = self.off[start : stop + 1].tolist()
        data = self.buf[off[0] : off[-1]].tobytes() if off else b""
        base = off[0] if off else 0
        if data.isascii():
            text = data.decode("ascii")
            return [text[a - base : b - base] for a, b in zip(off, off[1:], strict=False)]
        return [data[a - base : b - base].decode() for a, b in zip(off, off[1:], strict=False)]


def symbol_texts(symbols: np.ndarray, has: np.ndarray) -> list[str | None]:
    """Texts of the rows of ASCII `symbols` where `has` holds (None elsewhere), cut at C speed."""
    out: list[str | None] = [None] * symbols.shape[0]
    if not has.any():
        return out
    whole = bool(has.all())
    # widening u8 -> UCS-4 lets numpy cut fixed-width strings without a Python loop
    texts = (
        (symbols if whole else symbols[has]).astype(np.uint32).view(f"<U{symbols.shape[1]}").ravel().tolist()
    )
    if whole:
        return texts
    for row, text in zip(np.flatnonzero(has).tolist(), texts, strict=True):
        out[row] = text
    return out
