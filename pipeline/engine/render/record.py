"""`Record`: one puzzle's result as the output holds it, as a Python object (what `Job.results()` yields).

Built from the field table (`solvers.fields.RECORD_FIELDS`): a field added there is an
attribute here, of the type its kind says.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from solvers.fields import NAMES, RECORD_FIELDS, Field

_TYPES = {"position": "int", "input": "str", "text": "str", "status": "str", "name": "str", "int": "int",
          "fixed": "float", "counters": "dict[str, dict[str, Any]]"}  # fmt: skip


def _type(f: Field) -> str:
    """The Python type of a record field, from its kind."""
    base = _TYPES[f.kind]
    return f"{base} | None" if f.nullable or f.kind in ("name", "fixed") else base


def _from_json(cls: type, text: str | bytes) -> Any:
    """Read a record from its JSON line."""
    data = json.loads(text)
    return cls(**{k: data[k] for k in NAMES})


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
        "to_dict": _to_dict,
        "__doc__": "One puzzle's result: the public record fields (`solvers.fields.RECORD_FIELDS`).",
    },
    slots=True,
)
Record.__module__ = __name__
