"""Records from result columns, in a job's output format: JSON Lines and CSV (compiled writers,
`jsonl`), Parquet (`parquet`, with the optional pyarrow: an Arrow IPC stream a Parquet writer
appends), and Python objects (`record.Record`).

The process that solves a chunk renders its parts here (`pipeline.solve`), so a client only
moves the bytes into its output. Every renderer writes the record fields of the field table
(`solvers.fields.RECORD_FIELDS`); `tests/test_fields.py` holds each to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pipeline.columns import ResultColumns
    from pipeline.result import ChunkResult

FORMATS = ("jsonl", "csv", "parquet")  # the rendered ones (a job's `columns` are rendered by their reader)


def render_columns(
    columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray, fmt: str
) -> bytes:
    """Records of `columns` (rows aligned with `index` and `line`) in `fmt`: JSON Lines or CSV rows, each
    ending in a newline (no CSV header), or an Arrow IPC stream of the Parquet schema's table."""
    if fmt == "jsonl":
        from pipeline.render.jsonl import render

        body = render(columns, input_name, index, line)
        return body + b"\n" if body else b""
    if fmt == "csv":
        from pipeline.render.jsonl import render_csv

        return render_csv(columns, input_name, index, line)
    if fmt == "parquet":
        from pipeline.render.parquet import ipc_bytes

        return ipc_bytes(columns, input_name, index, line)
    raise ValueError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")


def render(result: ChunkResult, fmt: str) -> bytes:
    """A chunk result's records (held as columns) in `fmt` (see `render_columns`)."""
    if result.columns is None:
        raise ValueError(f"a part rendered as {result.header.format} cannot be rendered again as {fmt}")
    return render_columns(result.columns, result.header.input, result.row_indices(), result.row_lines(), fmt)
