"""Parquet records from a chunk's columns (pyarrow, the optional extra `parquet`): what pandas, polars
and DuckDB users load, typed as the field table says (`counters` as its JSON text). Written uncompressed,
dictionary-encoded only where values repeat: on 49k 9x9 records 10 ms and 13.8 MB against 26 ms and 4.2 MB
with snappy (the JSON Lines are 22 MB).
"""

from __future__ import annotations

from typing import IO, Any

import numpy as np

from pipeline.contract.part import Part
from solvers.fields import RECORD_FIELDS
from solvers.model.columns import ResultColumns
from solvers.model.frame import columns_table, schema  # the one Arrow builder, the field table's schema

INSTALL_HINT = "pip install 'sudoku-batch[parquet]'"
DICTIONARY = [f.name for f in RECORD_FIELDS if f.dictionary]  # few distinct values; the rest mostly unique
STATISTICS = [f.name for f in RECORD_FIELDS if f.statistics]  # min/max where useful


def available() -> bool:
    """True when pyarrow (with Parquet) can be imported."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def installed() -> bool:
    """True when pyarrow is installed, without importing it (~35 MB): what a client that writes no Parquet
    itself (a dataset's parts are the workers') checks before its job starts."""
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


class ParquetSink:
    """Writes record tables to one Parquet stream: a row group per slice, the footer at `close`."""

    def __init__(self, stream: IO[bytes]) -> None:
        import pyarrow.parquet as pq

        self.schema = schema()
        options = {"use_dictionary": DICTIONARY, "write_statistics": STATISTICS}
        self._writer = pq.ParquetWriter(stream, self.schema, compression="none", **options)

    def write(self, result: Part, start: int, stop: int) -> None:
        """Append rows `start:stop` of a chunk result (an IPC body as it came, or columns tabulated here)."""
        data = table(result) if result.columns is not None else read_ipc(result.body)
        self._writer.write_table(data.slice(start, stop - start))

    def write_table(self, data: Any) -> None:
        """Append a table of the records' schema (a dataset's Parquet part) as a row group."""
        self._writer.write_table(data.cast(self.schema))

    def close(self) -> None:
        """Write the footer (a file cut short before it is not a Parquet file)."""
        self._writer.close()


def table(result: Part) -> Any:
    """The records of a chunk result held as columns as an Arrow table of the records' schema."""
    if result.columns is None:
        raise ValueError(f"a part rendered as {result.header.format} has no columns to tabulate")
    return records_table(result.columns, result.header.input, result.row_indices(), result.row_lines())


def records_table(columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray) -> Any:
    """The records of result columns as an Arrow table: the one builder, the counters' text the compiled
    writer's (`pipeline.engine.render.jsonl.counters_texts`)."""
    from pipeline.engine.render.jsonl import counters_texts

    return columns_table(columns, input_name, index, line, counters_texts(columns))


def ipc_bytes(columns: ResultColumns, input_name: str, index: np.ndarray, line: np.ndarray) -> bytes:
    """Records of `columns` as an Arrow IPC stream (the schema, one record batch): what a worker sends
    and the client's Parquet writer appends as a row group, without parsing a record."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    data = records_table(columns, input_name, index, line)
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_table(data)
    return sink.getvalue().to_pybytes()


def arrow_owned(data: bytes | bytearray | memoryview) -> Any:
    """A copy of `data` in memory Arrow owns (needing no GIL to release), for a reader that may use Arrow's
    threads: one dropping a Python buffer as the interpreter exits is ended by Python inside Arrow's noexcept
    code, a SIGABRT after the command's work is done (issue 31, item 8)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    sink.write(data)
    return sink.getvalue()


def read_parquet(data: bytes | bytearray | memoryview) -> Any:
    """The table of a Parquet file held in memory (a dataset's part), read from a copy Arrow owns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(pa.BufferReader(arrow_owned(data))) as source:
        return source.read()


def read_ipc(body: bytes | bytearray | memoryview) -> Any:
    """The table of an Arrow IPC stream (`ipc_bytes`), its buffers read in place."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(body)).read_all()
