"""JSON Lines and CSV records from `ResultColumns`, written by the compiled writers (`writers.py`, generated
from the field table by `put.py`): their arguments from the table, and buffers sized for their worst case.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

import numpy as np

from pipeline.engine.render.put import KEY_TEXTS, LITERAL_BYTES, escapes, field_params, lit, render_counters
from pipeline.engine.render.writers import write_csv, write_jsonl
from solvers.fields import COUNTER_DECIMALS, RECORD_FIELDS, Field
from solvers.model.columns import ResultColumns
from solvers.model.frame import ms_fixed
from solvers.model.status import STATUS_NAMES
from solvers.model.texts import Texts

_TEXTS = [f for f in RECORD_FIELDS if f.kind == "text"]
_STATUS_BYTES = max(len(s) for s in STATUS_NAMES) + 2
_JSON_STATUS, _CSV_STATUS = Texts.of([f'"{name}"' for name in STATUS_NAMES]), Texts.of(STATUS_NAMES)
_INPUT = next(k for k, f in enumerate(RECORD_FIELDS) if f.kind == "input")
_PARAMS = {f.name: field_params(f) for f in RECORD_FIELDS if f.kind != "counters"}  # the writers' parameters


def render(columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray) -> bytes:
    """The JSON Lines records of `columns` (rows aligned with `index` and `line`, int64), newline-joined."""
    return _rendered(jsonl_bound, render_into, columns, input_name, index, line)[:-1].tobytes()


def render_csv(columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray) -> bytes:
    """The CSV rows of `columns` (no header; each row ends in a newline)."""
    return _rendered(csv_bound, csv_into, columns, input_name, index, line).tobytes()


def _rendered(bound: Callable[..., int], into: Callable[..., int], *args: Any) -> np.ndarray:
    out = np.empty(bound(*args), dtype=np.uint8)
    return out[: into(*args, out)]


def jsonl_bound(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    plain: tuple[bool, ...] | None = None,
) -> int:
    """The most bytes `render_into` can write for these rows: literals, the widest number of each column,
    and the texts as they are (six times where one needs escaping). Tight (~1.05x what 9x9 records take),
    so a part is rendered straight into a buffer it may keep (`pipeline.engine.render.Arena`). `plain`:
    whether each text field is free of bytes to escape (`plain_texts`), when the caller knows."""
    c = columns
    if len(c) == 0:
        return 0
    numbers = _numbers_bytes(c, index, line) + _number_bytes(c.counter_time_ns, COUNTER_DECIMALS)
    numbers += _number_bytes(c.counter_nodes) + _number_bytes(c.counter_guesses)
    inp = len(encode_basestring(input_name).encode())
    per_row = LITERAL_BYTES + _STATUS_BYTES + inp + 2 * _widest(c, encode_basestring) + numbers + 32
    plain = plain_texts(c) if plain is None else plain
    texts = sum((1 if p else 6) * getattr(c, f.array).buf.size for f, p in zip(_TEXTS, plain, strict=True))
    return len(c) * per_row + texts + c.counters_raw.buf.size


def csv_bound(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    plain: tuple[bool, ...] | None = None,
) -> int:
    """The most bytes `csv_into` can write for these rows (as `jsonl_bound`; a quoted field at most
    doubles, plus its quotes)."""
    c = columns
    if len(c) == 0:
        return 0
    inp = len(_csv_field(input_name).encode())
    per_row = 28 + _STATUS_BYTES + inp + 2 * _widest(c, _csv_field) + _numbers_bytes(c, index, line)
    texts = sum(getattr(c, f.array).buf.size for f in _TEXTS)
    counters = len(c) * (2 * _counters_row_bytes(c) + 2) + 2 * c.counters_raw.buf.size  # quoted, doubled
    return len(c) * per_row + 2 * texts + counters


def render_into(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    out: np.ndarray,
    plain: tuple[bool, ...] | None = None,
) -> int:
    """Write the JSON Lines records of `columns` (rows aligned with `index` and `line`), each ending in a
    newline, at the start of `out` (uint8, at least `jsonl_bound` long); return the bytes written."""
    c = columns
    plain = plain_texts(c) if plain is None else plain
    if not _fits(jsonl_bound, c, input_name, index, line, out, plain):
        return 0
    inp = lit(KEY_TEXTS[_INPUT] + encode_basestring(input_name))
    args = record_args(c, inp, index, line, _JSON_STATUS, _names(c, encode_basestring))
    counters = [c.counter_kind, c.counter_solver, c.counter_nodes, c.counter_guesses, c.counter_time_ns]
    counters += [_nonempty(c.counters_raw.buf), c.counters_raw.off]
    return int(write_jsonl(*map(_read_only, [*args.values(), *counters]), out, *plain))


def csv_into(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    out: np.ndarray,
    plain: tuple[bool, ...] | None = None,
) -> int:
    """Write the CSV rows of `columns` (no header; each row ends in a newline) at the start of `out`
    (uint8, at least `csv_bound` long); return the bytes written."""
    c = columns
    if not _fits(csv_bound, c, input_name, index, line, out, None):
        return 0
    args = record_args(c, lit(_csv_field(input_name)), index, line, _CSV_STATUS, _names(c, _csv_field))
    counters = counters_texts(c)
    return int(write_csv(*map(_read_only, [*args.values(), _nonempty(counters.buf), counters.off]), out))


def _fits(bound: Callable[..., int], c: ResultColumns, *args: Any) -> bool:
    """Whether there are rows to write (ValueError, one line, when `index`, `line` or the buffer do not fit
    them)."""
    input_name, index, line, out, plain = args
    if len(c) == 0:
        return False
    if index.shape != (len(c),) or line.shape != (len(c),):
        raise ValueError(f"{index.size} indices and {line.size} lines for {len(c)} results")
    if out.shape[0] < bound(c, input_name, index, line, plain):
        raise ValueError("the buffer is smaller than the records' bound")
    return True


def record_args(
    c: ResultColumns, inp: np.ndarray, index: np.ndarray, line: np.ndarray, statuses: Texts, names: Texts
) -> dict[str, np.ndarray]:
    """Both compiled writers' arguments for the record's fields but `counters`, named and in field order, by
    each field's kind: the writers' leading parameters (`put.field_params`)."""
    at = {"line": line, "index": index, "input": inp, "status": statuses, "solver": names}
    args = (pair for f in RECORD_FIELDS if f.kind != "counters" for pair in _field_args(f, c, at))
    return dict(args)


def _field_args(f: Field, c: ResultColumns, at: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """One record field's arguments to the compiled writers, named as `put.field_params` says."""
    if f.kind in ("input", "position"):
        values = [at[f.name]]
    elif f.kind == "text":
        values = [_nonempty(getattr(c, f.array).buf), getattr(c, f.array).off]
    elif f.kind in ("status", "name"):  # an id into the names written beforehand: `at` holds them
        values = [getattr(c, f.array), _nonempty(at[f.name].buf), at[f.name].off]
    else:
        number = getattr(c, f.array)
        values = [ms_fixed(number, f.decimals) if f.kind == "fixed" else number]
        values += [getattr(c, f.valid)] if f.valid else []
    return list(zip(_PARAMS[f.name], values, strict=True))


def _numbers_bytes(c: ResultColumns, index: np.ndarray, line: np.ndarray) -> int:
    """The widest printed value of each position and number field of the record (the field table's)."""
    widths = [_number_bytes(index), _number_bytes(line)]
    for f in RECORD_FIELDS:
        if f.kind in ("int", "fixed"):
            values = getattr(c, f.array)
            widths.append(
                _number_bytes(ms_fixed(values, f.decimals) if f.kind == "fixed" else values, f.decimals)
            )
    return sum(widths)


def _number_bytes(values: np.ndarray, decimals: int = 0) -> int:
    """The most bytes a value of an int column takes printed: sign and digits, and for a fixed-point
    column of `decimals` the point and the leading zeros a small value gets (`0.0012`)."""
    if not values.size:
        return 1
    top = max(abs(int(values.max())), abs(int(values.min())))
    return len(str(top)) + 1 + (decimals + 2 if decimals else 0)


def _names(c: ResultColumns, escape: Callable[[str], str]) -> Texts:
    """The solver names as a record writes them (JSON strings, CSV fields)."""
    return Texts.of([escape(name) for name in c.names or [""]])


def _widest(c: ResultColumns, escape: Callable[[str], str]) -> int:
    return max(len(escape(name).encode()) for name in c.names or [""])


def _csv_field(text: str) -> str:
    """A text as one CSV field (quoted when it must be), as Python's csv module writes it."""
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _counters_row_bytes(c: ResultColumns) -> int:
    """The most bytes a row's counters object takes in JSON but its raw text's."""
    return 2 * _widest(c, encode_basestring) + 3 * 22 + 64


def counters_texts(columns: ResultColumns) -> Texts:
    """Every row's `counters` object as the records write it (JSON text): for the CSV and Parquet files."""
    c = columns
    names = _names(c, encode_basestring)
    out = np.empty(len(c) * _counters_row_bytes(c) + c.counters_raw.buf.size + 2, dtype=np.uint8)
    off = np.zeros(len(c) + 1, np.uint64)
    counters = [c.counter_kind, c.counter_solver, c.counter_nodes, c.counter_guesses, c.counter_time_ns]
    args = [_nonempty(names.buf), names.off, *counters, _nonempty(c.counters_raw.buf), c.counters_raw.off]
    used = render_counters(*map(_read_only, args), out, off)
    return Texts(out[: int(used)], off)


def plain_texts(columns: ResultColumns) -> tuple[bool, ...]:
    """Whether each text field holds nothing to escape in JSON (true of every compact grid, and of any slice
    of a plain buffer: a part's runs share their part's answer)."""
    return tuple(_plain(getattr(columns, f.array).buf) for f in _TEXTS)


def _plain(buf: np.ndarray) -> bool:
    """True when `buf` (UTF-8) holds nothing to escape in JSON: no control byte, quote or backslash."""
    return not buf.size or not escapes(_read_only(buf))  # one signature, whoever owns the bytes


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view (no copy): the kernel then compiles once, whatever owns the bytes."""
    view = a.view()
    view.flags.writeable = False
    return view


def _nonempty(buf: np.ndarray) -> np.ndarray:
    """A byte buffer the kernel can take (never zero-sized: same compiled signature every time)."""
    return buf if buf.size else np.zeros(1, np.uint8)
