"""Records from result columns, in a job's output format: JSON Lines and CSV (compiled writers,
`jsonl`), Parquet (`parquet`, with the optional pyarrow: an Arrow IPC stream a Parquet writer
appends), and Python objects (`record.Record`).

The process that solves a chunk renders its parts here (`pipeline.engine.solve`), so a client only
moves the bytes into its output. Every renderer writes the record fields of the field table
(`solvers.fields.RECORD_FIELDS`); `tests/test_fields.py` holds each to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from pipeline.contract.columns import ResultColumns
    from pipeline.contract.part import Part

FORMATS = ("jsonl", "csv", "parquet")  # the rendered ones (a job's `columns` are rendered by their reader)


def render_columns(
    columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray, fmt: str
) -> bytes:
    """Records of `columns` (rows aligned with `index` and `line`) in `fmt`: JSON Lines or CSV rows, each
    ending in a newline (no CSV header), or an Arrow IPC stream of the Parquet schema's table."""
    if fmt == "jsonl":
        from pipeline.engine.render.jsonl import render

        body = render(columns, input_name, index, line)
        return body + b"\n" if body else b""
    if fmt == "csv":
        from pipeline.engine.render.jsonl import render_csv

        return render_csv(columns, input_name, index, line)
    if fmt == "parquet":
        from pipeline.engine.render.parquet import ipc_bytes

        return ipc_bytes(columns, input_name, index, line)
    raise ValueError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")


class Arena(Protocol):
    """Where a part's records are rendered when they should not land in a fresh buffer: a local process's
    shared memory, which its command writes to the output from (`client.ring`), no copy in between."""

    def take(self, size: int) -> np.ndarray | None:
        """A writable uint8 buffer of at least `size` bytes, or None (none free: a fresh one is used)."""

    def done(self, buffer: np.ndarray, used: int) -> None:
        """The records took the first `used` bytes of `buffer` (the last one `take` gave)."""


def render_runs(
    columns: ResultColumns,
    input_name: str,
    index: np.ndarray,
    line: np.ndarray,
    fmt: str,
    runs: list[tuple[int, int]],
    arena: Arena | None = None,
) -> tuple[np.ndarray, list[int]]:
    """JSON Lines or CSV records of `columns` rendered run by run into one buffer (`arena`'s, else a fresh
    one): -> (the records, uint8; where each run's rows start in it, then its end). `runs`: (first row,
    rows) covering the columns in order; a reader may cut the body at their edges."""
    from pipeline.engine.render.jsonl import csv_bound, csv_into, jsonl_bound, plain_texts, render_into

    bound, into = (jsonl_bound, render_into) if fmt == "jsonl" else (csv_bound, csv_into)
    plain = plain_texts(columns) if fmt == "jsonl" else None  # once for every run
    pieces = [
        (columns.slice(first, first + count), index[first : first + count], line[first : first + count])
        for first, count in runs
    ]
    size = sum(bound(c, input_name, i, ln, plain) for c, i, ln in pieces)
    buffer = arena.take(size) if arena is not None and size else None
    out = buffer if buffer is not None else np.empty(size, dtype=np.uint8)
    offsets, at = [0], 0
    for c, i, ln in pieces:
        at += into(c, input_name, i, ln, out[at:], plain)
        offsets.append(at)
    if buffer is not None:
        arena.done(buffer, at)  # type: ignore[union-attr]
    return out[:at], offsets


def render(result: Part, fmt: str) -> bytes:
    """A chunk result's records (held as columns) in `fmt` (see `render_columns`)."""
    if result.columns is None:
        raise ValueError(f"a part rendered as {result.header.format} cannot be rendered again as {fmt}")
    return render_columns(result.columns, result.header.input, result.row_indices(), result.row_lines(), fmt)
