"""A chunk's results as flat arrays (`Packed`), and their compact bytes between worker and collector.

Why: the rendered JSON Lines records are ~460 bytes per 9x9 puzzle (the field names and
the input name again on every line); the arrays they are rendered from take ~190. Results
travel worker -> Redis -> collector as these arrays, and the collector renders them, so
Redis stores and moves 2.4x fewer bytes: less memory for uncollected results, and half
the CPU redis-server and both clients spent moving them.

Wire form (`to_bytes`): one JSON line naming each part (`[name, dtype, count]`) and the
scalars, then the parts' raw little-endian bytes back to back. Integer columns travel in
the narrowest dtype holding their values; offsets travel as lengths. `from_bytes`
refuses anything inconsistent (lengths, ids, sizes) before the unchecked kernel reads it.
No numba here: the worker packs, the collector unpacks, `chunk_render` renders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from solvers.chunk_records import STATUS_NAMES, Columns

WIRE = "packed1"  # the layout line's format tag
LAYOUT_MAX = 1 << 20  # bytes of the layout line (solver names included)
MAX_ABS = 10**15  # integers beyond this are refused: the renderer budgets 21 bytes per number


@dataclass
class Packed:
    """What the renderer reads for each row of a chunk (offsets index the byte buffers)."""

    p_buf: np.ndarray  # uint8: the puzzle texts (UTF-8) back to back
    p_off: np.ndarray  # uint64[n+1]
    status: np.ndarray  # uint8 codes into STATUS_NAMES
    sol_buf: np.ndarray  # uint8: the solution texts
    sol_off: np.ndarray  # uint64[n+1]; an empty range = no solution (null)
    cost: np.ndarray  # int64 (0 where there is none)
    has_cost: np.ndarray  # bool
    solver: np.ndarray  # int16 ids into `names`, -1 for none
    names: list[str]
    time_q: np.ndarray  # int64: time_ms * 10**TIME_DECIMALS
    time_ok: np.ndarray  # bool
    e_buf: np.ndarray  # uint8: error texts
    e_off: np.ndarray  # uint64[n+1]; empty = null
    nodes: np.ndarray  # int64
    guesses: np.ndarray
    restarts: np.ndarray
    c_kind: np.ndarray  # uint8: 0 {}, 1 {name: {nodes, guesses, time_ms}}, 2 raw JSON in c_buf
    c_name: np.ndarray  # int16 ids into `names`
    c_nodes: np.ndarray
    c_guesses: np.ndarray
    c_time_q: np.ndarray  # time_ms * 10**COUNTER_DECIMALS
    c_buf: np.ndarray  # uint8: raw counters JSON of kind-2 rows
    c_off: np.ndarray  # uint64[n+1]

    def __len__(self) -> int:
        return int(self.status.shape[0])


_BUFFERS = ("p", "sol", "e", "c")  # (X_buf, X_off) pairs
_INTS = ("status", "cost", "solver", "time_q", "nodes", "guesses", "restarts", "c_kind", "c_name")
_INTS += ("c_nodes", "c_guesses", "c_time_q")
_BOOLS = ("has_cost", "time_ok")
_KERNEL_DTYPE = {
    "status": np.uint8, "c_kind": np.uint8, "solver": np.int16, "c_name": np.int16,
    "cost": np.int64, "time_q": np.int64, "nodes": np.int64, "guesses": np.int64, "restarts": np.int64,
    "c_nodes": np.int64, "c_guesses": np.int64, "c_time_q": np.int64,
}  # fmt: skip


def pack_texts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate texts as UTF-8 bytes with their byte offsets."""
    joined = "".join(texts).encode()
    off = np.zeros(len(texts) + 1, np.uint64)
    np.cumsum(np.fromiter(map(len, texts), np.uint64, len(texts)), out=off[1:])
    if int(off[-1]) != len(joined):  # not all ASCII: offsets in bytes, not characters
        np.cumsum(np.fromiter((len(t.encode()) for t in texts), np.uint64, len(texts)), out=off[1:])
    return np.frombuffer(joined, dtype=np.uint8), off


def _pack_symbols(symbols: np.ndarray, has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`pack_texts` for solutions held as a block of ASCII symbols: rows without one are empty."""
    off = np.zeros(len(has) + 1, np.uint64)
    np.cumsum(has.astype(np.uint64) * np.uint64(symbols.shape[1]), out=off[1:])
    return np.ascontiguousarray(symbols[has]).ravel(), off


def _none(b: int) -> tuple[np.ndarray, np.ndarray]:
    """`pack_texts` of b empty texts."""
    return np.zeros(0, np.uint8), np.zeros(b + 1, np.uint64)


def pack(texts: list[str], cols: Columns) -> Packed:
    """Lay a chunk's puzzle texts and result Columns out as the renderer's arrays."""
    b = len(texts)
    p_buf, p_off = pack_texts(texts)
    if cols.symbols is None:
        sol_buf, sol_off = pack_texts(cols.solution_texts())
    else:  # grids of symbols (digits and letters)
        sol_buf, sol_off = _pack_symbols(*cols.symbols)
    e_buf, e_off = pack_texts([e or "" for e in cols.errors]) if any(cols.errors) else _none(b)
    c_buf, c_off = pack_texts(cols.counter_raw) if (cols.counter_kind == 2).any() else _none(b)
    has_cost = ~np.isnan(cols.cost)
    return Packed(
        p_buf=p_buf, p_off=p_off, status=cols.status, sol_buf=sol_buf, sol_off=sol_off,
        cost=np.where(has_cost, cols.cost, 0).astype(np.int64), has_cost=has_cost, solver=cols.solver,
        names=list(cols.names), time_q=cols.time_q, time_ok=cols.time_ok, e_buf=e_buf, e_off=e_off,
        nodes=cols.nodes, guesses=cols.guesses, restarts=cols.restarts, c_kind=cols.counter_kind,
        c_name=cols.counter_name, c_nodes=cols.counter_nodes, c_guesses=cols.counter_guesses,
        c_time_q=cols.counter_time_q, c_buf=c_buf, c_off=c_off,
    )  # fmt: skip


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


def to_bytes(packed: Packed, prefix: bytes = b"") -> bytes:
    """Serialise after `prefix`: a JSON layout line, then every part's raw bytes in layout order.

    One join, one copy of the megabytes: the caller's header goes in as `prefix`.
    """
    parts: list[tuple[str, np.ndarray]] = []
    for name in _BUFFERS:
        parts.append((f"{name}_buf", getattr(packed, f"{name}_buf")))
        parts.append((f"{name}_len", _narrow(np.diff(getattr(packed, f"{name}_off")))))
    parts += [(name, _narrow(np.asarray(getattr(packed, name)))) for name in _INTS]
    parts += [(name, np.asarray(getattr(packed, name), dtype=np.bool_)) for name in _BOOLS]
    layout = {
        "wire": WIRE,
        "n": len(packed),
        "names": packed.names,
        "parts": [[name, a.dtype.str, int(a.size)] for name, a in parts],
    }
    head = json.dumps(layout, separators=(",", ":")).encode()
    return b"".join([prefix, head, b"\n", *(np.ascontiguousarray(a).data for _, a in parts)])


_ALLOWED = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "|b1"}


def from_bytes(data: bytes | bytearray | memoryview, n: int) -> Packed:
    """Invert `to_bytes` for a chunk of `n` rows; ValueError for anything inconsistent.

    The arrays are views of `data` (no copy) except where the kernel needs another dtype.
    """
    view = memoryview(data)
    cut = bytes(view[:LAYOUT_MAX]).find(b"\n")
    if cut < 0:
        raise ValueError("packed results: no layout line")
    layout = json.loads(bytes(view[:cut]))
    if not isinstance(layout, dict) or layout.get("wire") != WIRE or layout.get("n") != n:
        raise ValueError(f"packed results: not a {WIRE} layout for {n} rows")
    names = layout.get("names")
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names) or len(names) > 32767:
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
        size = np.dtype(dtype).itemsize * count
        if at + size > len(view):
            raise ValueError(f"packed results: part {name} runs past the end")
        arrays[name] = np.frombuffer(view[at : at + size], dtype=dtype)
        at += size
    if at != len(view):
        raise ValueError("packed results: trailing bytes")
    return _assemble(arrays, names, n)


def _assemble(arrays: dict[str, np.ndarray], names: list[str], n: int) -> Packed:
    """Check the parts against each other and convert them to the kernel's dtypes."""
    expected = {f"{x}_{k}" for x in _BUFFERS for k in ("buf", "len")} | set(_INTS) | set(_BOOLS)
    if set(arrays) != expected:
        raise ValueError("packed results: missing or unknown parts")
    out: dict[str, object] = {"names": names}
    for x in _BUFFERS:
        buf, lengths = arrays[f"{x}_buf"], arrays[f"{x}_len"]
        if buf.dtype != np.uint8 or lengths.size != n:
            raise ValueError(f"packed results: bad {x} texts")
        if lengths.size and (int(lengths.min()) < 0 or int(lengths.max()) > buf.size):  # no sum wraps round
            raise ValueError(f"packed results: {x} lengths out of range")
        off = np.zeros(n + 1, np.uint64)
        np.cumsum(lengths, out=off[1:], dtype=np.uint64)
        if int(off[-1]) != buf.size:
            raise ValueError(f"packed results: {x} lengths do not add up to its bytes")
        if x == "c" and buf.size and int(buf.min()) < 32:  # raw JSON is copied as is: keep one line a row
            raise ValueError("packed results: a control byte in raw counters")
        out[f"{x}_buf"], out[f"{x}_off"] = buf, off
    wide: dict[str, np.ndarray] = {}
    for name in (*_INTS, *_BOOLS):
        a = arrays[name]
        if a.size != n:
            raise ValueError(f"packed results: {name} has {a.size} rows, not {n}")
        if name in _BOOLS:
            out[name] = a.astype(np.bool_)
            continue
        if a.size and (int(a.min()) < -MAX_ABS or int(a.max()) > MAX_ABS):
            raise ValueError(f"packed results: {name} out of range")
        wide[name] = a.astype(np.int64)  # checked below at full width, then narrowed for the kernel
    _check_ids(wide, len(names))
    out.update({name: a.astype(_KERNEL_DTYPE[name]) for name, a in wide.items()})
    return Packed(**out)  # type: ignore[arg-type]


def _check_ids(cols: dict[str, np.ndarray], n_names: int) -> None:
    """Refuse codes and ids the renderer would read out of its tables."""
    status, solver, kind, names = cols["status"], cols["solver"], cols["c_kind"], cols["c_name"]
    if status.size and (int(status.min()) < 0 or int(status.max()) >= len(STATUS_NAMES)):
        raise ValueError("packed results: unknown status code")
    if solver.size and (int(solver.min()) < -1 or int(solver.max()) >= n_names):
        raise ValueError("packed results: solver id out of range")
    if kind.size and (int(kind.min()) < 0 or int(kind.max()) > 2):
        raise ValueError("packed results: unknown counters kind")
    simple = names[kind == 1]
    if simple.size and (int(simple.min()) < 0 or int(simple.max()) >= n_names):
        raise ValueError("packed results: counters name id out of range")
