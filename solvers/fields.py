"""The one description of a result: a row per field, from which every form of a result is derived.

Why one table: a result took four forms (`SolveResult`, the pipeline's columns, the rendered records,
`Record`) described in seven modules that could disagree; now they, `HelperEntry`, the CSV header and
the Parquet schema are built from `FIELDS`, and `tests/test_fields.py` fails when a renderer disagrees
(adding a field: docs/architecture.md). Plain data, no numpy and no pyarrow: every package reads it.

The counted fields, one thing each whatever the solver: `nodes` is the answering member's work (search
nodes for the exact kernels, decisions for the SAT modes, iterations for the stochastic members);
`guesses` its branching decisions (stochastic: 0); `restarts` its runs beyond its first (an exact
member's kernel calls, a SAT member's solver calls, a stochastic member's reseeded runs plus its
solver's own restarts; 0 on the batch path). Every member's own figures are in `counters`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    """One field of a result: how each form holds it. `kind`: `int`, `text` (UTF-8; null as the empty text
    when `nullable`), `status` (a code, written as its name), `name` (a solver id, written as the name),
    `fixed` (a time in integer ns, written as ms to `decimals` decimals), `counters` (a JSON object; its
    text in CSV and Parquet), `input` (the chunk's input name), `position` (run-length coded: line, index)."""

    name: str  # the record field: JSON key, CSV column, Parquet column
    kind: str
    nullable: bool = False
    parquet: str = "int64"  # the Arrow type of its Parquet column: int64, float64 or string
    dictionary: bool = False  # Parquet dictionary-encodes it (few distinct values)
    statistics: bool = False  # Parquet keeps its min/max
    decimals: int = 0  # `fixed` fields: digits after the point
    record: bool = True  # a field of the record (False: of SolveResult only)
    result: str | None = None  # its SolveResult attribute (None: the pipeline sets it: a position)
    result_type: Any = None  # the attribute's type, as SolveResult declares it
    result_default: Any = None  # the attribute's default (SolveResult's order is RESULT_ORDER)
    posted: bool = False  # an escalation helper posts it for another process (`HelperEntry`)
    column: str = ""  # its array in the pipeline's columns (`ResultColumns`): "" for its name
    valid: str = ""  # a nullable number's mask there: true where it is not null
    doc: str = ""

    @property
    def array(self) -> str:
        """The name of its array in the pipeline's columns."""
        return self.column or self.name


TIME_DECIMALS = 4  # `time_ms` is written to 0.1 µs (held in ns: `time_ns`)
COUNTER_DECIMALS = 6  # counter times (ms) are written to 1 ns: their ns (`counter_time_ns`) as they are

FIELDS: tuple[Field, ...] = (
    Field("line", "position", statistics=True, doc="1-based input line where the puzzle starts"),
    Field("input", "input", parquet="string", dictionary=True, doc="the input's name"),
    Field("index", "position", statistics=True, doc="0-based position among the job's puzzles"),
    Field(
        "puzzle",
        "text",
        parquet="string",
        result="puzzle",
        result_type="str",
        result_default="",
        doc="the puzzle as given (one line)",
    ),
    Field(
        "status",
        "status",
        parquet="string",
        dictionary=True,
        result="status",
        result_type="Status",
        result_default=None,
        posted=True,
        doc="solved, unsolvable, timeout, approximate, invalid, error",
    ),
    Field(
        "solution",
        "text",
        nullable=True,
        parquet="string",
        result="solution",
        result_type="str | None",
        posted=True,
        doc="the grid in the input's notation; null when none",
    ),
    Field(
        "cost",
        "int",
        nullable=True,
        statistics=True,
        valid="has_cost",
        result="cost",
        result_type="int | None",
        doc="0 for a valid grid; the approximate grid's cost; null when no grid",
    ),
    Field(
        "solver",
        "name",
        nullable=True,
        parquet="string",
        dictionary=True,
        result="solver",
        result_type="str | None",
        posted=True,
        doc="the member that answered",
    ),
    Field(
        "time_ms",
        "fixed",
        nullable=True,
        parquet="float64",
        statistics=True,
        decimals=TIME_DECIMALS,
        result="elapsed",
        result_type="float",
        result_default=0.0,
        column="time_ns",
        valid="time_ok",
        doc="solving time of this puzzle (SolveResult.elapsed is seconds)",
    ),
    Field(
        "error",
        "text",
        nullable=True,
        parquet="string",
        result="error",
        result_type="str | None",
        doc="why there is no answer (invalid, error, timeout)",
    ),
    Field(
        "nodes",
        "int",
        statistics=True,
        result="nodes",
        result_type="int",
        result_default=0,
        posted=True,
        doc="the answering member's work (see the module docstring)",
    ),
    Field(
        "guesses",
        "int",
        statistics=True,
        result="guesses",
        result_type="int",
        result_default=0,
        posted=True,
        doc="the answering member's branching decisions",
    ),
    Field(
        "restarts",
        "int",
        statistics=True,
        result="restarts",
        result_type="int",
        result_default=0,
        posted=True,
        doc="the answering member's runs beyond its first",
    ),
    Field(
        "counters",
        "counters",
        parquet="string",
        result="counters",
        result_type="dict[str, dict[str, Any]]",
        posted=True,
        doc="per member: its own counters",
    ),
    Field(
        "solution_count",
        "int",
        nullable=True,
        record=False,
        result="solution_count",
        result_type="int | None",
        doc="with limit > 1: solutions found, up to the limit",
    ),
)

# SolveResult's attributes in their (positional) order: kept as they always were
RESULT_ORDER = (
    "status",
    "puzzle",
    "solution",
    "cost",
    "solver",
    "elapsed",
    "nodes",
    "guesses",
    "restarts",
    "solution_count",
    "error",
    "counters",
)

RECORD_FIELDS: tuple[Field, ...] = tuple(f for f in FIELDS if f.record)
NAMES: tuple[str, ...] = tuple(f.name for f in RECORD_FIELDS)  # the public record fields, in record order
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
BY_RESULT: dict[str, Field] = {f.result: f for f in FIELDS if f.result}
CSV_HEADER = ",".join(NAMES) + "\n"

assert sorted(RESULT_ORDER) == sorted(BY_RESULT), "RESULT_ORDER names every SolveResult field once"
