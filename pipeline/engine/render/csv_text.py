"""CSV records from result columns: the record fields as columns (`solvers.fields`), `counters` as its JSON
text, empty fields for null; written by the compiled writer (`pipeline.engine.render.jsonl.render_csv`), so
CSV
costs what JSON Lines costs. A part rendered as CSV where it was solved is written as it came.
"""

from __future__ import annotations

from pipeline.contract.part import Part
from solvers.fields import CSV_HEADER

HEADER = CSV_HEADER  # from the field table


def render_csv(result: Part, start: int, stop: int, header: bool) -> str:
    """Rows `start:stop` of a chunk result as CSV lines (after the header line when `header`)."""
    from pipeline.engine.render.jsonl import render_csv as compiled

    head = HEADER if header else ""
    if result.columns is None:
        if result.header.format != "csv":
            raise ValueError(f"a part rendered as {result.header.format} cannot be written as CSV")
        return head + result.body_rows(start, stop).decode()
    part = result.columns.slice(start, stop)
    rows = compiled(
        part, result.header.input, result.row_indices()[start:stop], result.row_lines()[start:stop]
    )
    return head + rows.decode()
