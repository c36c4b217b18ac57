"""`Record`: one puzzle's result as the output holds it, as a Python object (what `Job.results()` yields),
built from the field table (`solvers.fields.RECORD_FIELDS`): a field added there is an attribute here."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from solvers.fields import COUNTER_DECIMALS, NAMES, RECORD_FIELDS, Field
from solvers.model.frame import ms_fixed
from solvers.model.status import STATUS_NAMES

if TYPE_CHECKING:
    from solvers.model.columns import ResultColumns

_TYPES = {
    "position": "int",
    "input": "str",
    "text": "str",
    "status": "str",
    "name": "str",
    "int": "int",
    "fixed": "float",
    "counters": "dict[str, dict[str, Any]]",
}


def _type(f: Field) -> str:
    """The Python type of a record field, from its kind."""
    base = _TYPES[f.kind]
    return f"{base} | None" if f.nullable or f.kind in ("name", "fixed") else base


def _from_json(cls: type, text: str | bytes) -> Any:
    """Read a record from its JSON line."""
    data = json.loads(text)
    return cls(**{k: data[k] for k in NAMES})


def _rows(cls: type, c: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray) -> list[Any]:
    """The records of result columns (rows aligned with `index` and `line`), read from the arrays as they
    are: the same values as their JSON Lines read back, with no JSON text but the raw counters'."""
    columns = (_values(f, c, input_name, {"line": line, "index": index}) for f in RECORD_FIELDS)
    return [cls(*row) for row in zip(*columns, strict=True)]


def _values(f: Field, c: ResultColumns, input_name: str, positions: dict[str, np.ndarray]) -> list[Any]:
    """One record field of every row, by its kind (`solvers.fields`)."""
    if f.kind == "position":
        return positions[f.name].tolist()
    if f.kind == "input":
        return [input_name] * len(c)
    if f.kind == "counters":
        return _counters(c)
    values = getattr(c, f.array)
    if f.kind == "text":
        return [t or None for t in values.to_list()] if f.nullable else values.to_list()
    if f.kind in ("status", "name"):
        names = STATUS_NAMES if f.kind == "status" else [*c.names, None]  # solver id -1: null
        return [names[k] for k in values.tolist()]
    out = (ms_fixed(values, f.decimals) / 10.0**f.decimals if f.kind == "fixed" else values).tolist()
    if f.valid:
        out = [v if ok else None for v, ok in zip(out, getattr(c, f.valid).tolist(), strict=True)]
    return out


def _counters(c: ResultColumns) -> list[dict[str, Any]]:
    """Each row's counters: none, one member's three (`COUNTERS_SIMPLE`) or raw JSON (its text parsed)."""
    from solvers.model.columns import COUNTERS_RAW, COUNTERS_SIMPLE

    scale, buf, off = 10.0**COUNTER_DECIMALS, c.counters_raw.buf.tobytes(), c.counters_raw.off.tolist()
    names = [c.names[k] if k >= 0 else None for k in c.counter_solver.tolist()]
    nodes, guesses, ns = c.counter_nodes.tolist(), c.counter_guesses.tolist(), c.counter_time_ns.tolist()
    out: list[dict[str, Any]] = []
    for i, kind in enumerate(c.counter_kind.tolist()):
        if kind == COUNTERS_SIMPLE:
            out.append({names[i]: {"nodes": nodes[i], "guesses": guesses[i], "time_ms": ns[i] / scale}})
        else:
            out.append(json.loads(buf[off[i] : off[i + 1]]) if kind == COUNTERS_RAW else {})
    return out


def _to_dict(self: Any) -> dict[str, Any]:
    """The record as a dict in field order."""
    return {k: getattr(self, k) for k in NAMES}


def _fields() -> list[tuple[str, str, Any]]:
    """Record's fields in record order: required up to `counters` (an empty dict by default); a field
    added after it defaults to null (or 0, an empty text), so records written before it still read."""
    out: list[tuple[str, str, Any]] = []
    defaults = False
    for f in RECORD_FIELDS:
        if f.kind == "counters":
            defaults = True
            out.append((f.name, _type(f), dataclasses.field(default_factory=dict)))
        elif defaults:
            empty = None if "None" in _type(f) else {"int": 0, "str": ""}.get(_type(f))
            out.append((f.name, _type(f), dataclasses.field(default=empty)))
        else:
            out.append((f.name, _type(f), dataclasses.field()))
    return out


Record = dataclasses.make_dataclass(
    "Record",
    _fields(),
    namespace={
        "from_json": classmethod(_from_json),
        "rows": classmethod(_rows),
        "to_dict": _to_dict,
        "__doc__": "One puzzle's result: the public record fields (`solvers.fields.RECORD_FIELDS`).",
    },
    slots=True,
)
Record.__module__ = __name__
