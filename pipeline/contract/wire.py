"""`ResultColumns` as bytes between worker and collector: its arrays as they are, integers narrowed.

Why: a 9x9 puzzle's JSON Lines record is ~460 bytes, its columns ~190, so Redis stores and moves 2.4x fewer
bytes (half the CPU redis-server and both clients spend moving them). Form: one JSON line naming each part
(`[name, dtype, count]`), the row count and the solver names, then the parts' little-endian bytes in layout
order (`solvers.model.columns.COLUMNS`: a text as `<wire>_buf` and `<wire>_len`, an integer in the narrowest
dtype). `from_bytes` refuses anything inconsistent before the unchecked renderer reads it, ignores parts it
does not know and defaults a column a payload lacks, so a field added later breaks no older peer (a peer
whose columns mean otherwise is refused by the part's VERSION first).
"""

from __future__ import annotations

import json

import numpy as np

from solvers.model.columns import COLUMNS, Column, ResultColumns
from solvers.model.texts import Texts

WIRE = "packed1"  # the layout line's format tag
LAYOUT_MAX = 1 << 20  # bytes of the layout line (solver names included)
MAX_ABS = 10**15  # integers beyond this are refused: the renderer budgets 21 bytes per number
MAX_NAMES = 32767  # solver ids are int16
_ALLOWED = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "|b1"}


def _narrow(values: np.ndarray) -> np.ndarray:
    """The same integers in the narrowest little-endian dtype that holds them all."""
    if values.size == 0:
        return values.astype("<u1")
    lo, hi = int(values.min()), int(values.max())
    for code in ("u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8"):
        info = np.iinfo(code)
        if info.min <= lo and hi <= info.max:
            return values.astype("<" + code, copy=False)
    raise ValueError("integers out of range")  # unreachable for int64/uint64 columns


def _parts(columns: ResultColumns) -> list[tuple[str, np.ndarray]]:
    """Every wire part of `columns`, in layout order."""
    parts: list[tuple[str, np.ndarray]] = []
    for col in COLUMNS:
        value = getattr(columns, col.name)
        if col.kind == "text":
            parts += [(f"{col.wire}_buf", value.buf), (f"{col.wire}_len", _narrow(np.diff(value.off)))]
        elif col.kind == "int":
            parts.append((col.wire, _narrow(np.asarray(value))))
        else:
            parts.append((col.wire, np.asarray(value, dtype=np.bool_)))
    return parts


def to_bytes(columns: ResultColumns, prefix: bytes = b"") -> bytes:
    """Serialise after `prefix` (the caller's header: one join, one copy of the megabytes): a JSON layout
    line, then every part's raw bytes in layout order."""
    parts = _parts(columns)
    layout = {
        "wire": WIRE,
        "n": len(columns),
        "names": columns.names,
        "parts": [[name, a.dtype.str, int(a.size)] for name, a in parts],
    }
    head = json.dumps(layout, separators=(",", ":")).encode()
    return b"".join([prefix, head, b"\n", *(np.ascontiguousarray(a).data for _, a in parts)])


def from_bytes(data: bytes | bytearray | memoryview, n: int) -> ResultColumns:
    """Invert `to_bytes` for a chunk of `n` rows; ValueError ("packed results: ...") for any inconsistency.
    Text bytes are views of `data` (no copy); integers are widened to the renderers' dtypes."""
    view = memoryview(data)
    cut = bytes(view[:LAYOUT_MAX]).find(b"\n")
    if cut < 0:
        raise ValueError("packed results: no layout line")
    layout = json.loads(bytes(view[:cut]))
    if not isinstance(layout, dict) or layout.get("wire") != WIRE or layout.get("n") != n:
        raise ValueError(f"packed results: not a {WIRE} layout for {n} rows")
    names = layout.get("names")
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names) or len(names) > MAX_NAMES:
        raise ValueError("packed results: bad solver names")
    arrays: dict[str, np.ndarray] = {}
    at = cut + 1
    parts = layout.get("parts")
    for entry in parts if isinstance(parts, list) else [None]:
        if not isinstance(entry, list) or len(entry) != 3:
            raise ValueError(f"packed results: bad part {entry!r}")
        name, dtype, count = entry
        if not isinstance(name, str) or dtype not in _ALLOWED or not isinstance(count, int) or count < 0:
            raise ValueError(f"packed results: bad part {entry!r}")
        if name in arrays:
            raise ValueError(f"packed results: part {name} twice")
        size = np.dtype(dtype).itemsize * count
        if at + size > len(view):
            raise ValueError(f"packed results: part {name} runs past the end")
        arrays[name] = np.frombuffer(view[at : at + size], dtype=dtype)
        at += size
    if at != len(view):
        raise ValueError("packed results: trailing bytes")
    columns = ResultColumns(names=names, **{col.name: read_column(col, arrays, n) for col in COLUMNS})
    try:
        columns.check()
    except ValueError as exc:
        raise ValueError(f"packed results: {exc}") from None
    return columns


def read_column(col: Column, arrays: dict[str, np.ndarray], n: int) -> Texts | np.ndarray:
    """One column from its parts (checked), or its default when the payload has none of them."""
    if col.kind == "text":
        buf, lengths = arrays.get(f"{col.wire}_buf"), arrays.get(f"{col.wire}_len")
        if buf is None and lengths is None and col.wire not in _REQUIRED:
            return Texts.empty(n)
        bad = buf is None or lengths is None or buf.dtype != np.uint8
        if bad or lengths.size != n or lengths.dtype == bool:
            raise ValueError(f"packed results: bad {col.wire} texts")
        if lengths.size and (int(lengths.min()) < 0 or int(lengths.max()) > buf.size):  # no sum wraps round
            raise ValueError(f"packed results: {col.wire} lengths out of range")
        off = np.zeros(n + 1, np.uint64)
        np.cumsum(lengths, out=off[1:], dtype=np.uint64)
        if int(off[-1]) != buf.size:
            raise ValueError(f"packed results: {col.wire} lengths do not add up to its bytes")
        return Texts(buf, off)
    a = arrays.get(col.wire)
    if a is None:
        if col.wire in _REQUIRED:
            raise ValueError(f"packed results: missing part {col.wire}")
        return np.full(n, col.default, dtype=np.bool_ if col.kind == "bool" else col.dtype)
    if a.size != n:
        raise ValueError(f"packed results: {col.wire} has {a.size} rows, not {n}")
    if col.kind == "bool":
        return a.astype(np.bool_)
    lo, hi = max(-MAX_ABS, np.iinfo(col.dtype).min), min(MAX_ABS, np.iinfo(col.dtype).max)
    if a.dtype == np.bool_ or (a.size and (int(a.min()) < lo or int(a.max()) > hi)):
        raise ValueError(f"packed results: {col.wire} out of range")
    return a.astype(col.dtype)


_REQUIRED = {col.wire for col in COLUMNS if col.required}
