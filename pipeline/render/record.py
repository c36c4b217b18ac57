"""`Record`: one puzzle's result as the output holds it, as a Python object (what `Job.results()` yields)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipeline.columns import FIELDS


@dataclass(slots=True)
class Record:
    """One puzzle's result: the public record fields."""

    line: int
    input: str
    index: int
    puzzle: str
    status: str
    solution: str | None
    cost: int | None
    solver: str | None
    time_ms: float | None
    error: str | None
    nodes: int
    guesses: int
    restarts: int
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str | bytes) -> Record:
        """Read a record from its JSON line."""
        data = json.loads(text)
        return cls(**{k: data[k] for k in FIELDS})

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict in field order."""
        return {k: getattr(self, k) for k in FIELDS}


assert tuple(Record.__dataclass_fields__) == FIELDS  # one list of the public fields
