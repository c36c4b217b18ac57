"""Records from a chunk's `ResultColumns`: JSON Lines (`jsonl`, compiled), CSV (`csv_text`), Parquet
(`parquet`, with the optional pyarrow), and Python objects (`record.Record`).

Every renderer writes the public record fields (`solvers.fields.RECORD_FIELDS`) from the same
columns; `tests/test_fields.py` holds each to the field table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.result import ChunkResult

FORMATS = ("jsonl", "csv", "parquet")


def render(result: ChunkResult, fmt: str) -> bytes:
    """A chunk result's records in `fmt`: JSON Lines or CSV rows (each line ending in a newline, no CSV
    header), or an Arrow IPC stream of the Parquet schema's table (what a Parquet writer appends)."""
    if fmt == "jsonl":
        from pipeline.render.jsonl import render as render_jsonl

        assert result.columns is not None
        body = render_jsonl(result.columns, result.header.input, result.row_indices(), result.row_lines())
        return body + b"\n" if body else b""
    if fmt == "csv":
        from pipeline.render.csv_text import render_csv

        return render_csv(result, 0, len(result), header=False).encode()
    if fmt == "parquet":
        from pipeline.render.parquet import ipc_bytes

        return ipc_bytes(result)
    raise ValueError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")
