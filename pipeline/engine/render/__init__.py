"""Records from result columns, in a job's output format: JSON Lines and CSV (compiled writers, `jsonl`),
Parquet (`parquet`, the optional pyarrow), and Python objects (`record.Record`).

The process that solves a chunk renders its parts here, so a client only moves the bytes into its output.
Each format of `pipeline.contract.formats.FORMATS` gets its `Code` here, registered on its entry at import;
no other module chooses by format. Every renderer writes the field table's record fields.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol

import numpy as np

from pipeline.contract.formats import FORMATS, GZIP_LEVEL, check_format, compress
from pipeline.engine.render import parquet  # its module imports no pyarrow: its functions do

if TYPE_CHECKING:
    from pipeline.contract.part import Part
    from solvers.model.columns import ResultColumns


@dataclass(frozen=True)
class Code:
    """How a format is rendered: a format of lines by its bound and writer in `render.jsonl` (named: loaded
    when used); a format of tables by its records (`pieces`), stream writer, part file and file reader."""

    bound: str = ""
    into: str = ""
    plain: bool = False  # the writer takes the columns' plain texts, found once for every run
    pieces: Callable[..., list[bytes]] | None = None
    sink: Callable[[IO[bytes]], Any] | None = None
    file: Callable[..., list[bytes]] | None = None
    read_file: Callable[[bytes], Any] | None = None


def _parquet_file(
    columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray, compression: str
) -> list[bytes]:
    """A Parquet part file (compressed inside, as asked)."""
    import pyarrow.parquet as pq

    sink, table = io.BytesIO(), parquet.records_table(columns, input_name, index, line)
    level = GZIP_LEVEL if compression == "gzip" else None  # pyarrow's gzip default took 88 µs a record
    options = {"use_dictionary": parquet.DICTIONARY, "write_statistics": parquet.STATISTICS}
    pq.write_table(table, sink, compression=compression, compression_level=level, **options)
    return [sink.getvalue()]


FORMATS["jsonl"].code = Code("jsonl_bound", "render_into", plain=True)
FORMATS["csv"].code = Code("csv_bound", "csv_into")
FORMATS["parquet"].code = Code(
    pieces=lambda *records: [parquet.ipc_bytes(*records)],
    sink=parquet.ParquetSink,
    file=_parquet_file,
    read_file=parquet.read_parquet,
)


def _code(fmt: str) -> Code:
    """The code of a rendered format (ValueError, one line, for another name)."""
    return FORMATS[check_format(fmt)].code  # type: ignore[no-any-return]


class Arena(Protocol):
    """Where a part's records are rendered instead of a fresh buffer: a local process's shared memory, which
    its command writes to the output from (`client.ring`), no copy in between."""

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
) -> tuple[np.ndarray | bytes, list[int]]:
    """Records of `columns` in `fmt`: a format of lines rendered run by run (`runs`: (first row, rows)) into
    one buffer (`arena`'s, else a fresh one) -> (the records, where each run's rows start, then its end: a
    reader may cut the body there); another format -> (its bytes, [])."""
    code = _code(fmt)
    if code.pieces is not None:
        return b"".join(code.pieces(columns, input_name, index, line)), []
    from pipeline.engine.render import jsonl

    bound, into = getattr(jsonl, code.bound), getattr(jsonl, code.into)
    plain = jsonl.plain_texts(columns) if code.plain else None  # once for every run
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


def rows(result: Part, start: int, stop: int, fmt: str) -> list[Any]:
    """Records `start:stop` of a part in `fmt`, in pieces (no file header): its body's rows, or rendered now
    when held as columns (ValueError, one line, for a body of another format)."""
    if result.columns is None:
        if result.header.format != fmt:
            raise ValueError(f"a part rendered as {result.header.format} cannot be written as {fmt}")
        return [result.body_rows(start, stop)]
    index, line = result.row_indices()[start:stop], result.row_lines()[start:stop]
    columns = result.columns if (start, stop) == (0, len(result)) else result.columns.slice(start, stop)
    return _pieces(columns, result.header.input, index, line, fmt)


def _pieces(
    columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray, fmt: str
) -> list[Any]:
    """Records of `columns` in `fmt`, in pieces written one after the other (no copy to join them)."""
    code = _code(fmt)
    if code.pieces is not None:
        return code.pieces(columns, input_name, index, line)
    body, _ = render_runs(columns, input_name, index, line, fmt, [(0, len(columns))])
    return [body] if len(body) else []


def part_file(
    columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray, fmt: str, compression: str
) -> list[bytes]:
    """A dataset part file's bytes, in pieces written one after the other: the format's header and its
    records (each file is a table), compressed as asked (inside the file for a format of tables)."""
    f = FORMATS[fmt]
    code = _code(fmt)
    if code.file is not None:
        return code.file(columns, input_name, index, line, compression)
    pieces = [f.header] if f.header else []
    pieces += _pieces(columns, input_name, index, line, fmt)
    return pieces if compression == "none" else [compress(b"".join(pieces), compression)]


def sink(fmt: str, stream: IO[bytes]) -> Any | None:
    """The writer that appends parts to `stream` in a format of tables (Parquet), None for one of lines."""
    code = _code(fmt)
    return code.sink(stream) if code.sink is not None else None


def read_file(fmt: str, data: bytes) -> Any:
    """The table of a part file in a format of tables (Parquet)."""
    return _code(fmt).read_file(data)  # type: ignore[misc]
