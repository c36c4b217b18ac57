"""CSV records from a chunk's columns: the record fields as columns, `counters` as its JSON text.

Rendered from `ResultColumns` as whole columns (Python lists, one `csv.writer` call per
slice), never by parsing the JSON Lines records; a result that came as records (`v` 1)
is read through them. Empty fields stand for null.
"""

from __future__ import annotations

import csv
import io
import json
from itertools import repeat

import numpy as np

from pipeline.columns import FIELDS, STATUS_NAMES, TIME_DECIMALS, ResultColumns
from pipeline.result import ChunkResult
from solvers.fields import CSV_HEADER

HEADER = CSV_HEADER  # from the field table


def render_csv(result: ChunkResult, start: int, stop: int, header: bool) -> str:
    """Rows `start:stop` of a chunk result as CSV lines (after the header line when `header`)."""
    out = io.StringIO()
    if header:
        out.write(HEADER)
    writer = csv.writer(out, lineterminator="\n")
    if result.columns is not None:
        writer.writerows(_rows(result, start, stop))
    else:
        for line in result.lines()[start:stop]:
            data = json.loads(line)
            data["counters"] = json.dumps(data["counters"], separators=(",", ":"))
            writer.writerow(["" if data[k] is None else data[k] for k in FIELDS])
    return out.getvalue()


def _rows(result: ChunkResult, start: int, stop: int) -> zip:
    """The CSV rows of a result held as columns, column by column."""
    from pipeline.render.jsonl import counters_texts

    c: ResultColumns = result.columns  # type: ignore[assignment]  # the caller checked
    part = slice(start, stop)
    names = [*c.names, ""]  # solver id -1 reads ""
    status = list(map(STATUS_NAMES.__getitem__, c.status[part].tolist()))
    cost = np.where(c.has_cost[part], c.cost[part], -1).tolist()
    costs = [v if ok else "" for v, ok in zip(cost, c.has_cost[part].tolist(), strict=True)]
    times = [
        q / 10**TIME_DECIMALS if ok else ""
        for q, ok in zip(c.time_q[part].tolist(), c.time_ok[part].tolist(), strict=True)
    ]
    return zip(
        result.row_lines()[part].tolist(),
        repeat(result.header.input),
        result.row_indices()[part].tolist(),
        c.puzzle.to_list(start, stop),
        status,
        c.solution.to_list(start, stop),
        costs,
        list(map(names.__getitem__, c.solver[part].tolist())),
        times,
        c.error.to_list(start, stop),
        c.nodes[part].tolist(),
        c.guesses[part].tolist(),
        c.restarts[part].tolist(),
        counters_texts(c).to_list(start, stop),
    )
