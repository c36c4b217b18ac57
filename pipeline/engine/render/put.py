"""The compiled pieces JSON Lines and CSV records are written with, and the writers' source generated from
the field table (`solvers.fields`) into `writers.py`: a line per field and format, by the field's kind.

Why compiled: the pipeline's overhead budget is about a microsecond per puzzle, and an f-string record
costs several. The writers put integers, fixed-point times and escaped strings straight into one buffer
sized for the worst case of their inputs (`pipeline.engine.render.jsonl`); strings are escaped as
`json.encoder.encode_basestring` does (tests hold them to `tests/jsonl_reference.py`). Why generated: numba
compiles a static sequence of fields; `tests/test_fields.py` fails while `writers.py` is not this module's
`writers_source()` (regenerate: `python -m pipeline.engine.render.put`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from numba import njit

from solvers.fields import COUNTER_DECIMALS, NAMES, RECORD_FIELDS, Field


def lit(text: str) -> np.ndarray:
    """A literal's UTF-8 bytes, as the writers copy them."""
    return np.frombuffer(text.encode(), dtype=np.uint8).copy()


def key_texts(names: tuple[str, ...]) -> tuple[list[str], list[int]]:
    """The record's keys in the table's order (`{"line":`, `,"input":`, ...) and where each starts when
    they are written back to back (`KEYS`), then their end."""
    texts = [("{" if k == 0 else ",") + f'"{name}":' for k, name in enumerate(names)]
    return texts, np.cumsum([0, *map(len, texts)]).tolist()


KEY_TEXTS, _ = key_texts(NAMES)
KEYS = lit("".join(KEY_TEXTS))
_C_NODES, _C_GUESSES, _C_TIME = lit(':{"nodes":'), lit(',"guesses":'), lit(',"time_ms":')
NULL, BLANK, _EMPTY, _HEX = lit("null"), lit(""), lit("{}"), lit("0123456789abcdef")
_SHORT = lit("\0" * 8 + "btn\0fr" + "\0" * 18)  # the control bytes JSON escapes by a letter: \b \t \n \f \r
ROW_END = lit("}\n")
# Every literal a JSON record writes (`jsonl_bound` adds the numbers, texts, names, quotes and nulls).
LITERAL_BYTES = sum(a.size for a in (KEYS, _C_NODES, _C_GUESSES, _C_TIME, NULL, _EMPTY, ROW_END))

U0, U1, _U10, _U48 = np.uint64(0), np.uint64(1), np.uint64(10), np.uint64(48)
# Every index below is uint64: numba then drops its negative-index check, and byte loops
# compile to straight copies (about 20x faster than with int64 indices).
_POW10 = np.array([10**k for k in range(20)], dtype=np.uint64)


@njit(cache=True, inline="always")
def put(out, pos, src, a, b):  # type: ignore[no-untyped-def]
    for k in range(a, b):
        out[pos] = src[k]
        pos += U1
    return pos


@njit(cache=True, inline="always")
def put_lit(out, pos, src):  # type: ignore[no-untyped-def]
    return put(out, pos, src, U0, np.uint64(src.size))


@njit(cache=True, inline="always")
def put_key(out, pos, a, b):  # type: ignore[no-untyped-def]
    return put(out, pos, KEYS, np.uint64(a), np.uint64(b))


@njit(cache=True, inline="always")
def end_row(out, pos, csv):  # type: ignore[no-untyped-def]
    """End a JSON record (`}` and a newline) or a CSV row (a newline)."""
    if not csv:
        out[pos] = 125
        pos += U1
    out[pos] = 10
    return pos + U1


@njit(cache=True, inline="always")
def comma(out, pos):  # type: ignore[no-untyped-def]
    out[pos] = 44
    return pos + U1


@njit(cache=True, inline="always")
def _digits(v):  # type: ignore[no-untyped-def]
    """Decimal digits of v (uint64): compares against powers of ten, no division."""
    n = U1
    while n < np.uint64(20) and v >= _POW10[n]:
        n += U1
    return n


@njit(cache=True, inline="always")
def _put_uint(out, pos, v, digits):  # type: ignore[no-untyped-def]
    """Write the uint64 v as exactly `digits` decimal digits (leading zeros kept)."""
    end = pos + digits
    i = end
    while i > pos:
        i -= U1
        q = v // _U10
        out[i] = _U48 + (v - q * _U10)
        v = q
    return end


@njit(cache=True, inline="always")
def put_int(out, pos, value):  # type: ignore[no-untyped-def]
    if value < 0:
        out[pos] = 45  # '-'
        pos += U1
        value = -value
    v = np.uint64(value)
    return _put_uint(out, pos, v, _digits(v))


@njit(cache=True, inline="always")
def _put_fixed(out, pos, q, decimals):  # type: ignore[no-untyped-def]
    """Write q / 10**decimals with trailing zeros dropped but one decimal kept."""
    if q < 0:
        out[pos] = 45
        pos += U1
        q = -q
    v = np.uint64(q)
    scale = _POW10[decimals]
    whole = v // scale
    pos = _put_uint(out, pos, whole, _digits(whole))
    out[pos] = 46  # '.'
    pos += U1
    frac = v - whole * scale
    keep = np.uint64(decimals)
    while keep > U1 and frac % _U10 == U0:
        frac //= _U10
        keep -= U1
    return _put_uint(out, pos, frac, keep)


@njit(cache=True, inline="always")
def put_number(out, pos, v, ok, decimals, null):  # type: ignore[no-untyped-def]
    """Write an integer, or a fixed-point number of `decimals` (> 0), or `null` where not `ok`."""
    if not ok:
        return put_lit(out, pos, null)
    return _put_fixed(out, pos, v, decimals) if decimals else put_int(out, pos, v)


@njit(cache=True, inline="always")
def put_id(out, pos, k, buf, off, null):  # type: ignore[no-untyped-def]
    """Write entry k of a table of names written beforehand (quoted, escaped), or `null` for k < 0."""
    if k < 0:
        return put_lit(out, pos, null)
    at = np.uint64(k)
    return put(out, pos, buf, off[at], off[at + U1])


@njit(cache=True, inline="always")
def put_text(out, pos, src, off, i, plain, nullable):  # type: ignore[no-untyped-def]
    """Write text i of `src` as a JSON string (`plain`: it holds nothing to escape), or null when `nullable`
    and empty."""
    a, b = off[i], off[i + U1]
    if nullable and a == b:
        return put_lit(out, pos, NULL)
    if not plain:
        return _put_str(out, pos, src, a, b)
    out[pos] = 34
    pos = put(out, pos + U1, src, a, b)
    out[pos] = 34
    return pos + U1


@njit(cache=True)
def _put_str(out, pos, src, a, b):  # type: ignore[no-untyped-def]
    """Write src[a:b] (UTF-8) as a JSON string literal, escaped like json.encoder.encode_basestring."""
    out[pos] = 34
    pos += U1
    for k in range(a, b):
        c = src[k]
        if c == 34 or c == 92:
            out[pos] = 92
            out[pos + U1] = c
            pos += np.uint64(2)
        elif c < 32:
            out[pos] = 92
            if _SHORT[c]:
                out[pos + U1] = _SHORT[c]
                pos += np.uint64(2)
            else:
                out[pos + U1] = 117  # \u00XX
                out[pos + np.uint64(2)] = 48
                out[pos + np.uint64(3)] = 48
                out[pos + np.uint64(4)] = _HEX[c >> 4]
                out[pos + np.uint64(5)] = _HEX[c & 15]
                pos += np.uint64(6)
        else:
            out[pos] = c
            pos += U1
    out[pos] = 34
    return pos + U1


@njit(cache=True, inline="always")
def put_csv(out, pos, src, off, i):  # type: ignore[no-untyped-def]
    """Write text i of `src` as a CSV field: as it is, or quoted (quotes doubled) if it holds , " CR or LF."""
    a, b = off[i], off[i + U1]
    quote = False
    for k in range(a, b):
        c = src[k]
        if c == 44 or c == 34 or c == 10 or c == 13:
            quote = True
            break
    if not quote:
        return put(out, pos, src, a, b)
    out[pos] = 34
    pos += U1
    for k in range(a, b):
        c = src[k]
        out[pos] = c
        pos += U1
        if c == 34:
            out[pos] = 34
            pos += U1
    out[pos] = 34
    return pos + U1


@njit(cache=True, inline="always")
def put_counters(out, pos, i, n_buf, n_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off):  # type: ignore[no-untyped-def]
    """Write row i's counters object: `{}`, one solver's three counters, or its raw JSON."""
    if c_kind[i] == 1:
        out[pos] = 123
        pos = put_id(out, pos + U1, c_name[i], n_buf, n_off, NULL)
        pos = put_int(out, put_lit(out, pos, _C_NODES), c_nodes[i])
        pos = put_int(out, put_lit(out, pos, _C_GUESSES), c_guesses[i])
        pos = _put_fixed(out, put_lit(out, pos, _C_TIME), c_time_ns[i], COUNTER_DECIMALS)
        out[pos] = 125
        out[pos + U1] = 125
        return pos + np.uint64(2)
    if c_kind[i] == 2:
        return put(out, pos, c_buf, c_off[i], c_off[i + U1])
    return put_lit(out, pos, _EMPTY)


@njit(cache=True)
def render_counters(n_buf, n_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off, out, off):  # type: ignore[no-untyped-def]
    """Write every row's counters object back to back; `off[i]:off[i+1]` is row i's."""
    pos = U0
    for j in range(c_kind.shape[0]):
        i = np.uint64(j)
        off[i] = pos
        pos = put_counters(
            out, pos, i, n_buf, n_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off
        )
    off[np.uint64(c_kind.shape[0])] = pos
    return pos


@njit(cache=True, nogil=True)
def escapes(buf):  # type: ignore[no-untyped-def]
    """Whether some byte of `buf` must be escaped in JSON (one pass, no early exit: it vectorises)."""
    found = 0
    for k in range(buf.shape[0]):
        c = buf[k]
        found |= (c < 32) | (c == 34) | (c == 92)
    return found != 0


COUNTERS = ["c_kind", "c_name", "c_nodes", "c_guesses", "c_time_ns", "c_buf", "c_off"]  # the raw counters


def field_params(f: Field) -> list[str]:
    """The writers' parameters for one record field but `counters`, by its kind (`solvers.fields`)."""
    if f.kind in ("input", "position"):  # `inp`: the input's name as written (JSON: with its key)
        return ["inp" if f.kind == "input" else f.name]
    if f.kind == "text":
        return [f"{f.name}_buf", f"{f.name}_off"]
    if f.kind in ("status", "name"):  # an id into the names, written beforehand
        return [f.name, f"{f.name}_buf", f"{f.name}_off"]
    return [f.name, *([f.valid] if f.valid else [])]


def _value(f: Field, csv: bool, at: str) -> str:
    """The call writing row i's value of field `f` at `at` (the position after its key or comma)."""
    n, null = f.name, "BLANK" if csv else "NULL"
    if f.kind == "input":
        return f"put_lit(out, {at}, inp)"
    if f.kind in ("position", "int") and not f.valid:
        return f"put_int(out, {at}, {n}[i])"
    if f.kind in ("position", "int", "fixed"):
        ok = f"{f.valid}[i]" if f.valid else "True"
        return f"put_number(out, {at}, {n}[i], {ok}, {f.decimals}, {null})"
    if f.kind in ("status", "name"):
        return f"put_id(out, {at}, {n}[i], {n}_buf, {n}_off, {null})"
    text = f"{n}_buf, {n}_off, i" if f.kind == "text" else "c_buf, c_off, i"
    if csv:
        return f"put_csv(out, {at}, {text})"
    if f.kind == "text":
        return f"put_text(out, {at}, {text}, {n}_plain, {f.nullable})"
    names = next(g.name for g in RECORD_FIELDS if g.kind == "name")  # counters name the solvers
    return f"put_counters(out, {at}, i, {names}_buf, {names}_off, {', '.join(COUNTERS)})"


def _line(call: str) -> list[str]:
    """`pos = call` in the loop, as ruff lays it out (its arguments on a line of their own when too long)."""
    line = f"        pos = {call}"
    if len(line) <= 110:
        return [line]
    head, args = call.split("(", 1)
    return [f"        pos = {head}(", f"            {args[:-1]}", "        )"]


def _writer(name: str, csv: bool) -> list[str]:
    """One writer's source: every row of the record fields in the table's order, each ending in a newline."""
    params = [p for f in RECORD_FIELDS if f.kind != "counters" for p in field_params(f)]
    params += ["c_buf", "c_off", "out"] if csv else [*COUNTERS, "out"]
    params += [] if csv else [f"{f.name}_plain" for f in RECORD_FIELDS if f.kind == "text"]
    body = ["    pos = U0", "    for j in range(index.shape[0]):", "        i = np.uint64(j)"]
    _, starts = key_texts(tuple(f.name for f in RECORD_FIELDS))
    for k, f in enumerate(RECORD_FIELDS):
        key = f"put_key(out, pos, {starts[k]}, {starts[k + 1]})"  # `inp` holds the input's key and name
        at = "comma(out, pos)" if csv and k else "pos" if csv or f.kind == "input" else key
        if len(_value(f, csv, at)) > 96 and at != "pos":  # too long: the key or comma on a line of its own
            body += _line(at)
            at = "pos"
        body += _line(_value(f, csv, at))
    body += _line(f"end_row(out, pos, {csv})") + ["    return pos"]
    what = "CSV row (nulls empty)" if csv else "JSON record"
    return [
        "",
        "",
        "@njit(cache=True)",
        f"def {name}(  # type: ignore[no-untyped-def]",
        *textwrap.wrap(", ".join(params) + ",", 110, initial_indent="    ", subsequent_indent="    "),
        "):  # fmt: skip",
        f'    """Every row as a {what}, each ending in a newline; return the bytes written."""',
        *body,
    ]


def writers_source() -> str:
    """The source of `writers.py`: the JSON Lines and CSV writers of the field table's record fields."""
    names = ["BLANK", "NULL", "U0", "comma", "end_row", "put_counters", "put_csv", "put_id"]
    names += ["put_int", "put_key", "put_lit", "put_number", "put_text"]
    head = [
        '"""The compiled JSON Lines and CSV writers, generated from the field table by',
        "`python -m pipeline.engine.render.put`: do not edit (`tests/test_fields.py` compares them).",
        '"""',
        "",
        "import numpy as np",
        "from numba import njit",
        "",
        "from pipeline.engine.render.put import (",
        *(f"    {n}," for n in names),
        ")",
    ]
    return "\n".join([*head, *_writer("write_jsonl", False), *_writer("write_csv", True)]) + "\n"


if __name__ == "__main__":
    Path(__file__).with_name("writers.py").write_text(writers_source())
