"""Result columns as an Arrow table, a pandas or a polars DataFrame: the Parquet output's fields and types.

Why one builder (`columns_table`): Parquet files, Arrow IPC parts, `Results.to_arrow` and `Job.to_arrow`
built their tables three ways that had to agree; now each tabulates `ResultColumns` here, field by field
from `solvers.fields`, with no SolveResult and no JSON text per row. pyarrow, pandas and polars stay
optional: imported when a table is asked for, a missing one a one-line ImportError naming the extra.
"""

from __future__ import annotations

import importlib
from json.encoder import encode_basestring
from types import ModuleType
from typing import Any

import numpy as np

from solvers.fields import COUNTER_DECIMALS, RECORD_FIELDS, TIME_DECIMALS, Field
from solvers.model.status import STATUS_NAMES

EXTRAS = {"pyarrow": "parquet", "pandas": "dataframe", "polars": "polars"}  # module -> the extra bringing it
_SIMPLE = ("nodes", "guesses", "time_ms")  # one member's counters, written by the compiled writer's rule


def quantise(values: np.ndarray, decimals: int) -> tuple[np.ndarray, np.ndarray]:
    """(round(values * 10**decimals) as int64, finite mask): the one rule of the digits all outputs print."""
    finite = np.isfinite(values) & (np.abs(values) < 1e12)
    return np.rint(np.where(finite, values, 0.0) * 10.0**decimals).astype(np.int64), finite


def seconds_ns(seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(seconds as integer ns, finite mask): how a SolveResult's `elapsed` is held in the columns; a time
    within 0.5 ns of a 0.1 µs tie moves 1 ns to the side ms rounding takes, so `time_ms` prints the same."""
    finite = np.isfinite(seconds) & (np.abs(seconds) < 1e9)  # 1e12 ms: a time the records can print
    ns = np.rint(np.where(finite, seconds, 0.0) * 1e9).astype(np.int64)
    return ns - (ms_fixed(ns, TIME_DECIMALS) - quantise(seconds * 1000.0, TIME_DECIMALS)[0]), finite


def ms_fixed(ns: np.ndarray, decimals: int) -> np.ndarray:
    """Integer ns as ms in fixed point of `decimals` (int64): the one rule of the digits `time_ms` prints."""
    return np.rint(ns / 1e9 * 1000.0 * 10.0**decimals).astype(np.int64)


def fixed(q: int, decimals: int) -> str:
    """Write q / 10**decimals with trailing zeros dropped but one decimal kept (`12.0`, `0.0219`)."""
    whole, frac = divmod(abs(q), 10**decimals)
    return f"{'-' if q < 0 else ''}{whole}.{f'{frac:0{decimals}d}'.rstrip('0') or '0'}"


def need(module: str, what: str, extra: str | None = None) -> ModuleType:
    """Import `module` for `what` (a method's name), or raise a one-line ImportError naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = extra or EXTRAS[module]
        raise ImportError(f"{what} needs {module}: pip install 'sudoku-batch[{extra}]'") from None


def schema() -> Any:
    """The records' Arrow schema: the field table's record fields with their Parquet types."""
    pa = need("pyarrow", "an Arrow table")
    return pa.schema([(f.name, getattr(pa, f.parquet)()) for f in RECORD_FIELDS])


def jsonl_options() -> Any:
    """pyarrow's JSON reader options for JSON Lines records: every field by the schema but `counters` (an
    object per record, read as a struct of its solvers; inferred, pyarrow 26 hung on a dataset of parts)."""
    pa = need("pyarrow", "an Arrow table")
    import pyarrow.json as pj

    flat = pa.schema([f for f in schema() if f.name != "counters"])
    return pj.ParseOptions(explicit_schema=flat, unexpected_field_behavior="ignore")


def to_pandas(table: Any) -> Any:
    """An Arrow table of records as a pandas DataFrame (what `pandas.read_parquet` makes of the file)."""
    return table.to_pandas()


def to_polars(table: Any) -> Any:
    """An Arrow table of records as a polars DataFrame (what `polars.read_parquet` makes of the file)."""
    return need("polars", "to_polars()").from_arrow(table)


def columns_table(c: Any, input_name: str, index: np.ndarray, line: np.ndarray, counters: Any = None) -> Any:
    """The records of result columns (`ResultColumns`, rows aligned with `index` and `line`) as an Arrow
    table of `schema()`. `counters`: the rows' counters as JSON text (`Texts`) when the caller has them
    written (the pipeline's compiled writer: cheaper than Arrow's kernel calls), else joined here."""
    pa = need("pyarrow", "an Arrow table")
    at = {"line": line, "index": index, "counters": counters}
    return pa.Table.from_arrays([_array(pa, f, c, input_name, at) for f in RECORD_FIELDS], schema=schema())


def _array(pa: ModuleType, f: Field, c: Any, input_name: str, at: dict[str, Any]) -> Any:
    """One record field of the columns as an Arrow array, by its kind (`solvers.fields`)."""
    if f.kind == "position":
        return pa.array(at[f.name])
    if f.kind == "input":
        return pa.array([input_name], pa.string()).take(pa.array(np.zeros(len(c), np.int64)))
    if f.kind == "counters":
        text = at["counters"]
        return _counters(pa, c) if text is None else strings(pa, text.buf, text.off, None)
    values = getattr(c, f.array)
    if f.kind == "text":
        return strings(pa, values.buf, values.off, np.diff(values.off) > 0 if f.nullable else None)
    if f.kind == "status":
        return pa.array(STATUS_NAMES, pa.string()).take(pa.array(values))
    if f.kind == "name":
        return _names(pa, c.names, values, str)
    mask = ~getattr(c, f.valid) if f.valid else None
    return pa.array(
        ms_fixed(values, f.decimals) / 10.0**f.decimals if f.kind == "fixed" else values, mask=mask
    )


def _names(pa: ModuleType, names: list[str], ids: np.ndarray, write: Any) -> Any:
    """Each row's name (`write` of it) by its id into `names`; -1 reads null."""
    ids = ids.astype(np.int64)
    ids[ids < 0] = len(names)  # -1: the null after the names
    return pa.array([*map(write, names), None], pa.string()).take(pa.array(ids))


def null_empty(pa: ModuleType, strings: Any) -> Any:
    """A string array with its empty texts made null (a nullable text field's null is its empty text)."""
    pc = importlib.import_module("pyarrow.compute")
    return pc.if_else(pc.equal(strings, ""), pa.scalar(None, pa.string()), strings)


def strings(pa: ModuleType, data: np.ndarray, offsets: np.ndarray, valid: np.ndarray | None) -> Any:
    """An Arrow string array over a UTF-8 buffer and offsets (no Python string per row); null where not
    `valid` (None: none is)."""
    n, large = len(offsets) - 1, int(offsets[-1]) >= 2**31  # over 2 GB: 64-bit offsets, then chunks
    kind = pa.LargeStringArray if large else pa.StringArray
    bitmap, nulls = None, 0
    if valid is not None and not valid.all():
        bitmap, nulls = pa.py_buffer(np.packbits(valid, bitorder="little")), int(n - valid.sum())
    bounds = pa.py_buffer(offsets.astype(np.int64 if large else np.int32))
    array = kind.from_buffers(n, bounds, pa.py_buffer(np.ascontiguousarray(data)), bitmap, null_count=nulls)
    return pa.array(array.to_pylist(), pa.string()) if large else array  # pragma: no branch


def _counters(pa: ModuleType, c: Any) -> Any:
    """Each row's counters as the compiled writer writes them: `{}`, one member's three counters
    (`{"<solver>":{"nodes":..,"guesses":..,"time_ms":..}}`) or the raw JSON text, by Arrow's kernels."""
    pc = importlib.import_module("pyarrow.compute")
    names = _names(pa, c.names, c.counter_solver, encode_basestring)
    text = pc.binary_join_element_wise(
        "{",
        names,
        ':{"nodes":',
        pc.cast(pa.array(c.counter_nodes), pa.string()),
        ',"guesses":',
        pc.cast(pa.array(c.counter_guesses), pa.string()),
        ',"time_ms":',
        _fixed_texts(pa, pc, c.counter_time_ns, COUNTER_DECIMALS),
        "}}",
        "",
    )
    raw = strings(pa, c.counters_raw.buf, c.counters_raw.off, None)
    kind = c.counter_kind
    return pc.if_else(pa.array(kind == 1), text, pc.if_else(pa.array(kind == 2), raw, "{}"))


def _fixed_texts(pa: ModuleType, pc: ModuleType, q: np.ndarray, decimals: int) -> Any:
    """q / 10**decimals written as the compiled writer writes it: trailing zeros dropped, one decimal kept."""
    whole, frac = np.divmod(np.abs(q), 10**decimals)
    digits = pc.utf8_rtrim(pc.utf8_lpad(pc.cast(pa.array(frac), pa.string()), decimals, "0"), "0")
    digits = pc.if_else(pc.equal(digits, ""), "0", digits)
    sign = pc.if_else(pa.array(q < 0), "-", "")
    return pc.binary_join_element_wise(sign, pc.cast(pa.array(whole), pa.string()), ".", digits, "")


def simple_counters(counters: dict[str, Any]) -> tuple[str, int, int, int] | None:
    """(solver, nodes, guesses, time in ns) when the counters are one member's three counters, else None."""
    if len(counters) != 1:
        return None
    ((name, inner),) = counters.items()
    if not isinstance(inner, dict) or len(inner) != 3 or not all(k in inner for k in _SIMPLE):
        return None
    try:
        nodes, guesses, ms = int(inner["nodes"]), int(inner["guesses"]), float(inner["time_ms"])
    except (TypeError, ValueError):
        return None
    if not (np.isfinite(ms) and abs(ms) < 1e12) or nodes != inner["nodes"] or guesses != inner["guesses"]:
        return None
    return str(name), nodes, guesses, int(np.rint(ms * 10.0**COUNTER_DECIMALS))


def plain(value: Any) -> Any:
    """Make numpy scalars JSON-serialisable (counters a solver filled with them)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
