"""A job's records as one Arrow table (`Job.to_arrow`), from its parts in whatever format they were solved in.

Why per format: parts are rendered where they are solved, so they come as result columns, an Arrow IPC
stream, CSV rows or JSON Lines; each becomes the same table with the Parquet output's schema and values
(columns through `records_table`, the others through pyarrow's readers with the schema's types)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from client.collector import Slice
from pipeline.contract.part import Part
from pipeline.engine.render.parquet import arrow_owned, read_ipc, records_table
from solvers.fields import NAMES, RECORD_FIELDS
from solvers.model.frame import jsonl_options, null_empty, schema

COUNTERS_KEY = b'"counters":'  # the last field of a JSON Lines record (solvers.fields order)
NULLABLE_TEXTS = [f.name for f in RECORD_FIELDS if f.nullable and f.parquet == "string"]


def slices_table(slices: Iterable[Slice]) -> Any:
    """The records of (part, first row, end row) slices as one Arrow table, in the slices' order."""
    import pyarrow as pa

    tables = [part_table(result, start, stop) for result, start, stop in slices if stop > start]
    return pa.concat_tables(tables) if tables else schema().empty_table()


def part_table(result: Part, start: int, stop: int) -> Any:
    """Rows `start:stop` of a part as an Arrow table of the Parquet schema (ValueError for a format
    it cannot read: one line naming the part and the format)."""
    head = result.header
    name = f"part {head.chunk}:{head.row} of job {head.job}"
    if result.columns is not None:
        rows = result.columns.slice(start, stop)
        index, line = result.row_indices()[start:stop], result.row_lines()[start:stop]
        return records_table(rows, head.input, index, line)
    if head.format == "parquet":
        table = read_ipc(result.body).slice(start, stop - start)  # type: ignore[arg-type]
    elif head.format == "csv":
        table = csv_table(result.body_rows(start, stop))
    elif head.format == "jsonl":
        table = jsonl_table(result.body_rows(start, stop))
    else:
        raise ValueError(f"{name} is rendered as {head.format}: it cannot be read as a table")
    if not table.schema.equals(schema()):
        raise ValueError(f"{name} holds other fields or types than the records: {table.schema.names}")
    return table


def jsonl_table(body: bytes | bytearray | memoryview) -> Any:
    """JSON Lines records as a table: pyarrow's reader for every field but `counters`, whose text is cut
    from each line (its object would be read as a struct of its solvers)."""
    import pyarrow as pa
    import pyarrow.json as pj

    data = bytes(body)
    if not data.strip():
        return schema().empty_table()
    records = schema()
    table = pj.read_json(pa.BufferReader(arrow_owned(data)), parse_options=jsonl_options())
    at = len(COUNTERS_KEY)
    counters = [line[line.index(COUNTERS_KEY) + at : -1].decode() for line in data.split(b"\n") if line]
    arrays = {name: table.column(name) for name in NAMES if name != "counters"}
    arrays["counters"] = pa.array(counters, pa.string())
    return pa.Table.from_arrays([arrays[name] for name in NAMES], schema=records)


def csv_table(body: bytes | bytearray | memoryview) -> Any:
    """CSV rows (no header, the record fields in order, null as an empty field) as a table."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    records = schema()
    if not bytes(body[:1]):
        return records.empty_table()
    table = pcsv.read_csv(
        pa.BufferReader(arrow_owned(body)),  # the threaded reader: see arrow_owned
        read_options=pcsv.ReadOptions(column_names=list(NAMES)),
        parse_options=pcsv.ParseOptions(newlines_in_values=True),
        convert_options=pcsv.ConvertOptions(
            column_types={f.name: f.type for f in records},
            null_values=[""],  # numbers: an empty field is null
            strings_can_be_null=False,  # texts: an empty field is the empty text, null where nullable
            quoted_strings_can_be_null=False,
        ),
    )
    arrays = [
        null_empty(pa, table.column(name)) if name in NULLABLE_TEXTS else table.column(name) for name in NAMES
    ]
    return pa.Table.from_arrays(arrays, schema=records)
