"""Results as an Arrow table, a pandas or a polars DataFrame: the fields and types of the Parquet output.

Why built from the columns: `solve_many` returns `Results` held as arrays (`solvers.model.result`), so
its table is made from those arrays as they are, with no SolveResult and no JSON text per row
(counters are joined as text by Arrow's compute kernels); rows born as objects (invalid lines,
raced puzzles) are tabulated from their objects and put in place. The schema is the field
table's (`solvers.fields`: each record field's `parquet` type), the one the Parquet writer uses
(`pipeline.engine.render.parquet.schema` is this `schema`), and the values are what the files hold:
`time_ms` to 0.1 µs, `counters` as the JSON text the compiled writer prints, null where a record
has null. `tests/test_frames.py` holds the table equal to the pipeline's Parquet table of the
same results.

pyarrow, pandas and polars stay optional (the `parquet`, `dataframe` and `polars` extras):
nothing here imports them until a table is asked for, and a missing one is an ImportError of
one line naming the extra to install.
"""

from __future__ import annotations

import importlib
import json
from json.encoder import encode_basestring
from types import ModuleType
from typing import Any

import numpy as np

from solvers.fields import COUNTER_DECIMALS, RECORD_FIELDS, TIME_DECIMALS, Field

EXTRAS = {"pyarrow": "parquet", "pandas": "dataframe", "polars": "polars"}  # module -> the extra bringing it
_SIMPLE = ("nodes", "guesses", "time_ms")  # one member's counters, written by the compiled writer's rule


def quantise(values: np.ndarray, decimals: int) -> tuple[np.ndarray, np.ndarray]:
    """(round(values * 10**decimals) as int64, finite mask): the one rule of the digits all outputs print."""
    finite = np.isfinite(values) & (np.abs(values) < 1e12)
    return np.rint(np.where(finite, values, 0.0) * 10.0**decimals).astype(np.int64), finite


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


def to_pandas(table: Any) -> Any:
    """An Arrow table of records as a pandas DataFrame (what `pandas.read_parquet` makes of the file)."""
    return table.to_pandas()


def to_polars(table: Any) -> Any:
    """An Arrow table of records as a polars DataFrame (what `polars.read_parquet` makes of the file)."""
    return need("polars", "to_polars()").from_arrow(table)


def results_table(results: Any, input_name: str, status_names: list[str]) -> Any:
    """The records of `solve_many`'s results (a `solvers.model.result.Results`, read by its columns and
    born rows) as an Arrow table of `schema()`: row i is line i + 1, index i, of the input `input_name`.
    `status_names`: each status code's name. Neither is imported: that module calls this one."""
    pa = need("pyarrow", "Results.to_arrow()", "parquet")
    table = _columns_table(pa, results, input_name, status_names)
    born = results.born_rows()
    if not born:
        return table
    objects = _objects_table(pa, [results[i] for i in born], born, input_name)
    order = np.arange(len(results), dtype=np.int64)
    order[born] = len(results) + np.arange(len(born), dtype=np.int64)  # born rows from the objects' table
    return pa.concat_tables([table, objects]).take(pa.array(order))


def null_empty(pa: ModuleType, strings: Any) -> Any:
    """A string array with its empty texts made null (a nullable text field's null is its empty text)."""
    pc = importlib.import_module("pyarrow.compute")
    return pc.if_else(pc.equal(strings, ""), pa.scalar(None, pa.string()), strings)


def _columns_table(pa: ModuleType, r: Any, input_name: str, status_names: list[str]) -> Any:
    """Every row of `r` as its columns hold it (rows born as objects are laid over by the caller)."""
    n = len(r)
    index = np.arange(n, dtype=np.int64)
    has_solver = r.solver >= 0
    solver = np.where(has_solver, r.solver, len(r.names)).astype(np.int64)  # -1: the null after the names
    time_q, _ = quantise(r.ns.astype(np.float64) / 1e9 * 1000.0, TIME_DECIMALS)  # as `elapsed` (s) -> ms
    arrays = {
        "line": pa.array(index + 1),
        "input": pa.array([input_name], pa.string()).take(pa.array(np.zeros(n, np.int64))),
        "index": pa.array(index),
        "puzzle": pa.array(r.texts, pa.string()),
        "status": pa.array(status_names, pa.string()).take(pa.array(r.code)),
        "solution": _solutions(pa, r),
        "cost": pa.array(np.zeros(n, np.int64), mask=~r.solved_cost),
        "solver": pa.array([*r.names, None], pa.string()).take(pa.array(solver)),
        "time_ms": pa.array(time_q / 10.0**TIME_DECIMALS),
        "error": null_empty(pa, pa.array(r.error_texts, pa.string())).take(pa.array(r.error_id)),
        "nodes": pa.array(r.nodes),
        "guesses": pa.array(r.guesses),
        "restarts": pa.array(np.zeros(n, np.int64)),
        "counters": _counters(pa, r, solver, has_solver),
    }
    return pa.Table.from_arrays([arrays[f.name] for f in RECORD_FIELDS], schema=schema())


def _solutions(pa: ModuleType, r: Any) -> Any:
    """The solution texts: a block of ASCII symbols becomes the string array's buffer as it is."""
    if r.symbols is None:
        return null_empty(pa, pa.array(r.solutions, pa.string()))
    symbols, has = r.symbols
    offsets = np.zeros(len(has) + 1, np.int64)
    np.cumsum(has.astype(np.int64) * symbols.shape[1], out=offsets[1:])
    return strings(pa, symbols[has], offsets, has)


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


def _counters(pa: ModuleType, r: Any, solver: np.ndarray, has_solver: np.ndarray) -> Any:
    """Each row's counters as JSON text: `{"<solver>":{"nodes":..,"guesses":..,"time_ms":..}}`, or `{}`."""
    pc = importlib.import_module("pyarrow.compute")
    names = pa.array([encode_basestring(name) for name in r.names] + [""], pa.string()).take(pa.array(solver))
    q, _ = quantise(r.ns.astype(np.float64) / 1e6, COUNTER_DECIMALS)
    text = pc.binary_join_element_wise(
        "{", names, ':{"nodes":', pc.cast(pa.array(r.nodes), pa.string()), ',"guesses":',
        pc.cast(pa.array(r.guesses), pa.string()), ',"time_ms":', _fixed_texts(pa, pc, q, COUNTER_DECIMALS),
        "}}", "",
    )  # fmt: skip
    return pc.if_else(pa.array(has_solver), text, "{}")


def _fixed_texts(pa: ModuleType, pc: ModuleType, q: np.ndarray, decimals: int) -> Any:
    """q / 10**decimals written as the compiled writer writes it: trailing zeros dropped, one decimal kept."""
    whole, frac = np.divmod(np.abs(q), 10**decimals)
    digits = pc.utf8_rtrim(pc.utf8_lpad(pc.cast(pa.array(frac), pa.string()), decimals, "0"), "0")
    digits = pc.if_else(pc.equal(digits, ""), "0", digits)
    sign = pc.if_else(pa.array(q < 0), "-", "")
    return pc.binary_join_element_wise(sign, pc.cast(pa.array(whole), pa.string()), ".", digits, "")


def _objects_table(pa: ModuleType, items: list[Any], rows: list[int], input_name: str) -> Any:
    """Rows held as SolveResult objects (invalid lines, raced puzzles), a field at a time by its kind."""
    positions = {"line": [i + 1 for i in rows], "index": rows}
    data = {f.name: _object_values(pa, f, items, positions, input_name) for f in RECORD_FIELDS}
    return pa.Table.from_pydict(data, schema=schema())


def _object_values(pa: ModuleType, f: Field, items: list[Any], positions: dict, input_name: str) -> Any:
    """One record field of the objects, as the records hold it (`solvers.fields`)."""
    if f.kind == "position":
        return positions[f.name]
    if f.kind == "input":
        return [input_name] * len(items)
    if f.kind == "counters":
        return [counters_text(item.counters) for item in items]
    values = [getattr(item, f.result or f.name) for item in items]
    if f.kind == "status":
        return [str(v) for v in values]  # a Status is its value
    if f.kind == "fixed":  # seconds (`elapsed`) -> ms, to `decimals` digits; null unless finite
        q, finite = quantise(np.array(values, dtype=np.float64) * 1000.0, f.decimals)
        return pa.array(q / 10.0**f.decimals, mask=~finite)
    return [v or None for v in values] if f.kind == "text" and f.nullable else values


def counters_text(counters: dict[str, Any]) -> str:
    """One result's counters as the records write them: one member's three counters by the compiled
    writer's rule (`time_ms` to 1 ns, trailing zeros dropped), anything else as compact JSON."""
    if not counters:
        return "{}"
    simple = simple_counters(counters)
    if simple is None:
        return json.dumps(counters, separators=(",", ":"), default=plain, allow_nan=False)
    name, nodes, guesses, q = simple
    time_ms = fixed(q, COUNTER_DECIMALS)
    return f'{{{encode_basestring(name)}:{{"nodes":{nodes},"guesses":{guesses},"time_ms":{time_ms}}}}}'


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


__all__ = [
    "EXTRAS", "counters_text", "fixed", "need", "null_empty", "plain", "quantise", "results_table", "schema",
    "simple_counters", "strings", "to_pandas", "to_polars",
]  # fmt: skip
