"""JSON Lines records from `ResultColumns`, written by a compiled kernel.

The collector renders each chunk's columns as it writes them (`render`). Why compiled:
the pipeline's overhead budget is about a microsecond per puzzle, and an f-string record
costs several. The kernel writes integers, fixed-point times and escaped strings
straight into one preallocated byte buffer sized for the worst case of its inputs; the
strings are escaped as `json.encoder.encode_basestring` does (tests hold the kernel to a
plain-Python renderer of the same bytes, `tests/jsonl_reference.py`).
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

import numpy as np
from numba import njit

from solvers.fields import NAMES, RECORD_FIELDS, Field
from solvers.model.columns import COUNTER_DECIMALS, TIME_DECIMALS, ResultColumns
from solvers.model.frame import ms_fixed
from solvers.model.status import STATUS_NAMES
from solvers.model.texts import Texts


def _lit(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8).copy()


# the keys of the record, in the field table's order (`solvers.fields.NAMES`): the kernel writes them in turn
_KEY = {name: _lit(("{" if i == 0 else ",") + f'"{name}":') for i, name in enumerate(NAMES)}
_KEYS = list(_KEY.values())
_L_LINE, _L_PUZZLE, _L_STATUS, _L_SOLUTION = (_KEY[k] for k in ("line", "puzzle", "status", "solution"))
_L_COST, _L_SOLVER, _L_TIME, _L_ERROR = (_KEY[k] for k in ("cost", "solver", "time_ms", "error"))
_L_NODES, _L_GUESSES, _L_RESTARTS = (_KEY[k] for k in ("nodes", "guesses", "restarts"))
_L_COUNTERS = _KEY["counters"]
_L_C_NODES, _L_C_GUESSES, _L_C_TIME = _lit(':{"nodes":'), _lit(',"guesses":'), _lit(',"time_ms":')
_L_NULL, _L_EMPTY, _HEX = _lit("null"), _lit("{}"), _lit("0123456789abcdef")
# Every literal a record writes (`jsonl_bound` adds the numbers, texts, names, quotes, nulls and braces).
_LITERAL_BYTES = sum(a.size for a in (*_KEYS, _L_C_NODES, _L_C_GUESSES, _L_C_TIME, _L_NULL, _L_EMPTY))


_U0, _U1, _U10, _U48 = np.uint64(0), np.uint64(1), np.uint64(10), np.uint64(48)
# Every index below is uint64: numba then drops its negative-index check, and byte loops
# compile to straight copies (about 20x faster than with int64 indices).


@njit(cache=True, inline="always")
def _put(out, pos, src, a, b):  # type: ignore[no-untyped-def]
    for k in range(a, b):
        out[pos] = src[k]
        pos += _U1
    return pos


@njit(cache=True, inline="always")
def _put_lit(out, pos, src):  # type: ignore[no-untyped-def]
    return _put(out, pos, src, _U0, np.uint64(src.size))


_POW10 = np.array([10**k for k in range(20)], dtype=np.uint64)


@njit(cache=True, inline="always")
def _digits(v):  # type: ignore[no-untyped-def]
    """Decimal digits of v (uint64): compares against powers of ten, no division."""
    n = _U1
    while n < np.uint64(20) and v >= _POW10[n]:
        n += _U1
    return n


@njit(cache=True, inline="always")
def _put_uint(out, pos, v, digits):  # type: ignore[no-untyped-def]
    """Write the uint64 v as exactly `digits` decimal digits (leading zeros kept)."""
    end = pos + digits
    i = end
    while i > pos:
        i -= _U1
        q = v // _U10
        out[i] = _U48 + (v - q * _U10)
        v = q
    return end


@njit(cache=True, inline="always")
def _put_int(out, pos, value):  # type: ignore[no-untyped-def]
    if value < 0:
        out[pos] = 45  # '-'
        pos += _U1
        value = -value
    v = np.uint64(value)
    return _put_uint(out, pos, v, _digits(v))


@njit(cache=True, inline="always")
def _put_fixed(out, pos, q, decimals):  # type: ignore[no-untyped-def]
    """Write q / 10**decimals with trailing zeros dropped but one decimal kept."""
    if q < 0:
        out[pos] = 45
        pos += _U1
        q = -q
    v = np.uint64(q)
    scale = _POW10[decimals]
    whole = v // scale
    pos = _put_uint(out, pos, whole, _digits(whole))
    out[pos] = 46  # '.'
    pos += _U1
    frac = v - whole * scale
    keep = np.uint64(decimals)
    while keep > _U1 and frac % _U10 == _U0:
        frac //= _U10
        keep -= _U1
    return _put_uint(out, pos, frac, keep)


@njit(cache=True, inline="always")
def _put_plain(out, pos, src, a, b):  # type: ignore[no-untyped-def]
    """Write src[a:b] as a JSON string literal when it holds nothing to escape (checked by the caller)."""
    out[pos] = 34
    pos = _put(out, pos + _U1, src, a, b)
    out[pos] = 34
    return pos + _U1


@njit(cache=True)
def _put_str(out, pos, src, a, b):  # type: ignore[no-untyped-def]
    """Write src[a:b] (UTF-8) as a JSON string literal, escaped like json.encoder.encode_basestring."""
    out[pos] = 34
    pos += _U1
    for k in range(a, b):
        c = src[k]
        if c == 34 or c == 92:
            out[pos] = 92
            out[pos + _U1] = c
            pos += np.uint64(2)
        elif c < 32:
            out[pos] = 92
            if c == 10 or c == 13 or c == 9 or c == 8 or c == 12:
                out[pos + _U1] = (
                    110 if c == 10 else 114 if c == 13 else 116 if c == 9 else 98 if c == 8 else 102
                )
                pos += np.uint64(2)
            else:
                out[pos + _U1] = 117  # \u00XX
                out[pos + np.uint64(2)] = 48
                out[pos + np.uint64(3)] = 48
                out[pos + np.uint64(4)] = _HEX[c >> 4]
                out[pos + np.uint64(5)] = _HEX[c & 15]
                pos += np.uint64(6)
        else:
            out[pos] = c
            pos += _U1
    out[pos] = 34
    return pos + _U1


@njit(cache=True)
def _render(  # type: ignore[no-untyped-def]
    line, inp, index, puzzle_buf, puzzle_off, status, status_buf, status_off, solution_buf, solution_off,
    cost, has_cost, solver, solver_buf, solver_off, time_ms, time_ok, error_buf, error_off, nodes, guesses,
    restarts,
    c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off, out, p_plain, sol_plain,
):  # fmt: skip
    pos = _U0
    for j in range(index.shape[0]):
        i = np.uint64(j)
        if j:
            out[pos] = 10
            pos += _U1
        pos = _put_lit(out, pos, _L_LINE)
        pos = _put_int(out, pos, line[i])
        pos = _put_lit(out, pos, inp)  # `,"input":"...","index":` at once
        pos = _put_int(out, pos, index[i])
        pos = _put_lit(out, pos, _L_PUZZLE)
        if p_plain:
            pos = _put_plain(out, pos, puzzle_buf, puzzle_off[i], puzzle_off[i + _U1])
        else:
            pos = _put_str(out, pos, puzzle_buf, puzzle_off[i], puzzle_off[i + _U1])
        pos = _put_lit(out, pos, _L_STATUS)
        st = np.uint64(status[i])
        pos = _put(out, pos, status_buf, status_off[st], status_off[st + _U1])  # quoted beforehand
        pos = _put_lit(out, pos, _L_SOLUTION)
        if solution_off[i + _U1] > solution_off[i]:
            if sol_plain:
                pos = _put_plain(out, pos, solution_buf, solution_off[i], solution_off[i + _U1])
            else:
                pos = _put_str(out, pos, solution_buf, solution_off[i], solution_off[i + _U1])
        else:
            pos = _put_lit(out, pos, _L_NULL)
        pos = _put_lit(out, pos, _L_COST)
        pos = _put_int(out, pos, cost[i]) if has_cost[i] else _put_lit(out, pos, _L_NULL)
        pos = _put_lit(out, pos, _L_SOLVER)
        if solver[i] >= 0:
            name = np.uint64(solver[i])
            pos = _put(out, pos, solver_buf, solver_off[name], solver_off[name + _U1])  # quoted beforehand
        else:
            pos = _put_lit(out, pos, _L_NULL)
        pos = _put_lit(out, pos, _L_TIME)
        pos = _put_fixed(out, pos, time_ms[i], 4) if time_ok[i] else _put_lit(out, pos, _L_NULL)
        pos = _put_lit(out, pos, _L_ERROR)
        if error_off[i + _U1] > error_off[i]:
            pos = _put_str(out, pos, error_buf, error_off[i], error_off[i + _U1])
        else:
            pos = _put_lit(out, pos, _L_NULL)
        pos = _put_lit(out, pos, _L_NODES)
        pos = _put_int(out, pos, nodes[i])
        pos = _put_lit(out, pos, _L_GUESSES)
        pos = _put_int(out, pos, guesses[i])
        pos = _put_lit(out, pos, _L_RESTARTS)
        pos = _put_int(out, pos, restarts[i])
        pos = _put_lit(out, pos, _L_COUNTERS)
        pos = _put_counters(
            out,
            pos,
            i,
            solver_buf,
            solver_off,
            c_kind,
            c_name,
            c_nodes,
            c_guesses,
            c_time_ns,
            c_buf,
            c_off,
        )
        out[pos] = 125
        pos += _U1
    return pos


@njit(cache=True, inline="always")
def _put_counters(out, pos, i, n_buf, n_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off):  # type: ignore[no-untyped-def]
    """Write row i's counters object: `{}`, one solver's three counters, or its raw JSON."""
    if c_kind[i] == 1:
        out[pos] = 123
        name = np.uint64(c_name[i])
        pos = _put(out, pos + _U1, n_buf, n_off[name], n_off[name + _U1])  # quoted beforehand
        pos = _put_lit(out, pos, _L_C_NODES)
        pos = _put_int(out, pos, c_nodes[i])
        pos = _put_lit(out, pos, _L_C_GUESSES)
        pos = _put_int(out, pos, c_guesses[i])
        pos = _put_lit(out, pos, _L_C_TIME)
        pos = _put_fixed(out, pos, c_time_ns[i], 6)
        out[pos] = 125
        out[pos + _U1] = 125
        return pos + np.uint64(2)
    if c_kind[i] == 2:
        return _put(out, pos, c_buf, c_off[i], c_off[i + _U1])
    return _put_lit(out, pos, _L_EMPTY)


@njit(cache=True)
def _render_counters(n_buf, n_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off, out, off):  # type: ignore[no-untyped-def]
    """Write every row's counters object back to back; `off[i]:off[i+1]` is row i's."""
    pos = _U0
    for j in range(c_kind.shape[0]):
        i = np.uint64(j)
        off[i] = pos
        pos = _put_counters(
            out, pos, i, n_buf, n_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off
        )
    off[np.uint64(c_kind.shape[0])] = pos
    return pos


def render(columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray) -> bytes:
    """The JSON Lines records of `columns` (rows aligned with `index` and `line`, int64), newline-joined."""
    if len(columns) == 0:
        return b""
    out = np.empty(jsonl_bound(columns, input_name, index, line), dtype=np.uint8)
    used = render_into(columns, input_name, index, line, out)
    return out[: used - 1].tobytes()  # without the last newline


def jsonl_bound(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    plain: tuple[bool, bool] | None = None,
) -> int:
    """The most bytes `render_into` can write for these rows: literals, the widest number of each column,
    and the texts as they are (six times where one needs escaping). Tight (~1.05x what 9x9 records take),
    so a part is rendered straight into a buffer it may keep (`pipeline.engine.render.Arena`). `plain`:
    whether
    the puzzle and solution texts are free of bytes to escape (`plain_texts`), when the caller knows."""
    c = columns
    b = len(c)
    if b == 0:
        return 0
    numbers = (
        _numbers_bytes(c, index, line) + _number_bytes(c.counter_nodes) + _number_bytes(c.counter_guesses)
    )
    numbers += _number_bytes(c.counter_time_ns, COUNTER_DECIMALS)
    inp = len(encode_basestring(input_name).encode())
    name_max = max(len(encode_basestring(name).encode()) for name in c.names or [""])
    per_row = _LITERAL_BYTES + _STATUS_BYTES + inp + 2 * name_max + numbers + 32  # quotes, nulls, braces
    p_plain, s_plain = plain_texts(c) if plain is None else plain
    texts = (1 if p_plain else 6) * c.puzzle.buf.size + (1 if s_plain else 6) * c.solution.buf.size
    texts += 6 * c.error.buf.size
    return b * per_row + texts + c.counters_raw.buf.size + 1


def render_into(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    out: np.ndarray,
    plain: tuple[bool, bool] | None = None,
) -> int:
    """Write the JSON Lines records of `columns` (rows aligned with `index` and `line`), each ending in a
    newline, at the start of `out` (uint8, at least `jsonl_bound` long); return the bytes written."""
    b = len(columns)
    if b == 0:
        return 0
    if index.shape != (b,) or line.shape != (b,):
        raise ValueError(f"{index.size} indices and {line.size} lines for {b} results")
    plain = plain_texts(columns) if plain is None else plain
    if out.shape[0] < jsonl_bound(columns, input_name, index, line, plain):
        raise ValueError("the buffer is smaller than the records' bound")
    c = columns
    inp = np.frombuffer((_INPUT + encode_basestring(input_name) + _INDEX).encode(), dtype=np.uint8)
    statuses = _QUOTED_STATUS
    names = Texts.of([encode_basestring(name) for name in c.names or [""]])
    args = (
        *record_args(c, inp, index, line, statuses, names).values(),
        c.counter_kind, c.counter_solver, c.counter_nodes,
        c.counter_guesses, c.counter_time_ns, _nonempty(c.counters_raw.buf), c.counters_raw.off,
    )  # fmt: skip
    used = int(_render(*map(_read_only, args), out, *plain))
    out[used] = 10
    return used + 1


_INPUT, _INDEX = f',"{NAMES[1]}":', f',"{NAMES[2]}":'  # around the input's name: one literal with it
_QUOTED_STATUS = Texts.of([f'"{name}"' for name in STATUS_NAMES])  # statuses need no escaping
_STATUS_BYTES = max(len(s) for s in STATUS_NAMES) + 2


def _numbers_bytes(c: ResultColumns, index: np.ndarray, line: np.ndarray) -> int:
    """The widest printed value of each position and number field of the record (the field table's)."""
    numbers = (
        ms_fixed(getattr(c, f.array), f.decimals) if f.kind == "fixed" else getattr(c, f.array)
        for f in RECORD_FIELDS
        if f.kind in ("int", "fixed")
    )
    decimals = (f.decimals for f in RECORD_FIELDS if f.kind in ("int", "fixed"))
    return _number_bytes(index) + _number_bytes(line) + sum(map(_number_bytes, numbers, decimals))


def _number_bytes(values: np.ndarray, decimals: int = 0) -> int:
    """The most bytes a value of an int column takes printed: sign and digits, and for a fixed-point
    column of `decimals` the point and the leading zeros a small value gets (`0.0012`)."""
    if not values.size:
        return 1
    top = max(abs(int(values.max())), abs(int(values.min())))
    return len(str(top)) + 1 + (decimals + 2 if decimals else 0)


def plain_texts(columns: ResultColumns) -> tuple[bool, bool]:
    """Whether the puzzle and the solution texts hold nothing to escape in JSON (true of every compact grid,
    and of any slice of a plain buffer: a part's runs share their part's answer)."""
    return _plain(columns.puzzle.buf), _plain(columns.solution.buf)


@njit(cache=True, inline="always")
def _put_csv(out, pos, src, a, b):  # type: ignore[no-untyped-def]
    """Write src[a:b] as a CSV field: as it is, or quoted (quotes doubled) when it holds , " CR or LF."""
    quote = False
    for k in range(a, b):
        c = src[k]
        if c == 44 or c == 34 or c == 10 or c == 13:
            quote = True
            break
    if not quote:
        return _put(out, pos, src, a, b)
    out[pos] = 34
    pos += _U1
    for k in range(a, b):
        c = src[k]
        out[pos] = c
        pos += _U1
        if c == 34:
            out[pos] = 34
            pos += _U1
    out[pos] = 34
    return pos + _U1


@njit(cache=True, inline="always")
def _comma(out, pos):  # type: ignore[no-untyped-def]
    out[pos] = 44
    return pos + _U1


@njit(cache=True)
def _render_csv(  # type: ignore[no-untyped-def]
    line, inp, index, puzzle_buf, puzzle_off, status, status_buf, status_off, solution_buf, solution_off,
    cost, has_cost, solver, solver_buf, solver_off, time_ms, time_ok, error_buf, error_off, nodes, guesses,
    restarts,
    c_buf, c_off, out,
):  # fmt: skip
    """Every row as a CSV line (the record fields in table order, nulls empty), each ending in a newline."""
    pos = _U0
    for j in range(index.shape[0]):
        i = np.uint64(j)
        pos = _comma(out, _put_int(out, pos, line[i]))
        pos = _comma(out, _put(out, pos, inp, _U0, np.uint64(inp.size)))
        pos = _comma(out, _put_int(out, pos, index[i]))
        pos = _comma(out, _put_csv(out, pos, puzzle_buf, puzzle_off[i], puzzle_off[i + _U1]))
        st = np.uint64(status[i])
        pos = _comma(out, _put_csv(out, pos, status_buf, status_off[st], status_off[st + _U1]))
        pos = _comma(out, _put_csv(out, pos, solution_buf, solution_off[i], solution_off[i + _U1]))
        if has_cost[i]:
            pos = _put_int(out, pos, cost[i])
        pos = _comma(out, pos)
        if solver[i] >= 0:
            name = np.uint64(solver[i])
            pos = _put_csv(out, pos, solver_buf, solver_off[name], solver_off[name + _U1])
        pos = _comma(out, pos)
        if time_ok[i]:
            pos = _put_fixed(out, pos, time_ms[i], 4)
        pos = _comma(out, pos)
        pos = _comma(out, _put_csv(out, pos, error_buf, error_off[i], error_off[i + _U1]))
        pos = _comma(out, _put_int(out, pos, nodes[i]))
        pos = _comma(out, _put_int(out, pos, guesses[i]))
        pos = _comma(out, _put_int(out, pos, restarts[i]))
        pos = _put_csv(out, pos, c_buf, c_off[i], c_off[i + _U1])
        out[pos] = 10
        pos += _U1
    return pos


def render_csv(columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray) -> bytes:
    """The CSV rows of `columns` (no header; each row ends in a newline), written by a compiled kernel."""
    if len(columns) == 0:
        return b""
    out = np.empty(csv_bound(columns, input_name, index, line), dtype=np.uint8)
    return out[: csv_into(columns, input_name, index, line, out)].tobytes()


def csv_bound(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    plain: tuple[bool, bool] | None = None,
) -> int:
    """The most bytes `csv_into` can write for these rows (as `jsonl_bound`; a quoted field at most
    doubles, plus its quotes)."""
    c = columns
    b = len(c)
    if b == 0:
        return 0
    numbers = _numbers_bytes(c, index, line)
    inp = len(_csv_field(input_name).encode())
    name_max = max(len(name.encode()) for name in c.names or [""])
    texts = c.puzzle.buf.size + c.solution.buf.size + c.error.buf.size
    per_row = 16 + _STATUS_BYTES + inp + 2 * name_max + numbers + 6 * 2
    return b * per_row + 2 * texts + _counters_bound(c)


def _counters_bound(c: ResultColumns) -> int:
    """The most bytes every row's counters field takes in CSV (its JSON text as `counters_texts` bounds
    it, quoted, quotes doubled)."""
    name_max = max(len(encode_basestring(name).encode()) for name in c.names or [""])
    per_row = 2 * (2 * name_max + 3 * 22 + 64) + 2
    return len(c) * per_row + 2 * c.counters_raw.buf.size


def csv_into(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    out: np.ndarray,
    plain: tuple[bool, bool] | None = None,
) -> int:
    """Write the CSV rows of `columns` (no header; each row ends in a newline) at the start of `out`
    (uint8, at least `csv_bound` long); return the bytes written."""
    b = len(columns)
    if b == 0:
        return 0
    if index.shape != (b,) or line.shape != (b,):
        raise ValueError(f"{index.size} indices and {line.size} lines for {b} results")
    if out.shape[0] < csv_bound(columns, input_name, index, line):
        raise ValueError("the buffer is smaller than the rows' bound")
    c = columns
    inp = np.frombuffer(_csv_field(input_name).encode(), dtype=np.uint8)
    statuses = Texts.of(STATUS_NAMES)
    names = Texts.of(c.names or [""])
    counters = counters_texts(c)
    args = (*record_args(c, inp, index, line, statuses, names).values(), _nonempty(counters.buf))
    args += (counters.off,)
    return int(_render_csv(*map(_read_only, args), out))


def record_args(c: ResultColumns, inp: np.ndarray, index: np.ndarray, line: np.ndarray, statuses: Texts,
                names: Texts) -> dict[str, np.ndarray]:  # fmt: skip
    """Both compiled writers' arguments for the record's fields but `counters`, named and in field order, by
    each field's kind: the kernels' leading parameters (`tests/test_fields.py` holds them to the table)."""
    at = {"line": line, "index": index, "input": inp, "status": statuses, "solver": names}
    return dict(pair for f in RECORD_FIELDS if f.kind != "counters" for pair in _field_args(f, c, at))


def _field_args(f: Field, c: ResultColumns, at: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """One record field's arguments to the compiled writers, named after it (`solvers.fields`)."""
    if f.kind == "input":
        return [("inp", at[f.name])]  # the literal around the input's name, with it
    if f.kind == "position":
        return [(f.name, at[f.name])]
    values = getattr(c, f.array)
    if f.kind == "text":
        return [(f"{f.name}_buf", _nonempty(values.buf)), (f"{f.name}_off", values.off)]
    if f.kind in ("status", "name"):  # an id into the quoted names: `at` holds them
        table = at[f.name]
        return [(f.name, values), (f"{f.name}_buf", _nonempty(table.buf)), (f"{f.name}_off", table.off)]
    values = ms_fixed(values, f.decimals) if f.kind == "fixed" else values
    return [(f.name, values), *([(f.valid, getattr(c, f.valid))] if f.valid else [])]


def _csv_field(text: str) -> str:
    """A text as one CSV field (quoted when it must be), as Python's csv module writes it."""
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def counters_texts(columns: ResultColumns) -> Texts:
    """Every row's `counters` object as the records write it (JSON text): for the CSV and Parquet files."""
    c = columns
    b = len(c)
    names = Texts.of([encode_basestring(name) for name in c.names or [""]])
    name_max = max(len(encode_basestring(name).encode()) for name in c.names or [""])
    out = np.empty(b * (2 * name_max + 3 * 22 + 64) + c.counters_raw.buf.size + 2, dtype=np.uint8)
    off = np.zeros(b + 1, np.uint64)
    args = (
        _nonempty(names.buf), names.off, c.counter_kind, c.counter_solver, c.counter_nodes,
        c.counter_guesses, c.counter_time_ns, _nonempty(c.counters_raw.buf), c.counters_raw.off,
    )  # fmt: skip
    used = _render_counters(*map(_read_only, args), out, off)
    return Texts(out[: int(used)], off)


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view (no copy): the kernel then compiles once, whatever owns the bytes."""
    view = a.view()
    view.flags.writeable = False
    return view


def _nonempty(buf: np.ndarray) -> np.ndarray:
    """A byte buffer the kernel can take (never zero-sized: same compiled signature every time)."""
    return buf if buf.size else np.zeros(1, np.uint8)


def _plain(buf: np.ndarray) -> bool:
    """True when `buf` (UTF-8) holds nothing to escape in JSON: no control byte, quote or backslash."""
    return not buf.size or not _escapes(_read_only(buf))  # one signature, whoever owns the bytes


@njit(cache=True, nogil=True)
def _escapes(buf):  # type: ignore[no-untyped-def]
    """Whether some byte of `buf` must be escaped in JSON (one pass, no early exit: it vectorises)."""
    found = 0
    for k in range(buf.shape[0]):
        c = buf[k]
        found |= (c < 32) | (c == 34) | (c == 92)
    return found != 0


assert TIME_DECIMALS == 4 and COUNTER_DECIMALS == 6  # the kernel writes these precisions
