"""The output formats, defined once: each one's name, file extensions, media type, the header a file of it
starts with and what its records are; and the compressions of a dataset's parts. Every place that writes or
reads records looks a format up here; `pipeline.engine.render` registers each one's code on its entry at
import (`Format.code`): a new format is an entry here and its code there.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solvers.fields import CSV_HEADER

GZIP_LEVEL = 1  # 11 ms of CPU per MB of records against 100 ms at level 6, for 2.4x against 2.7x smaller


@dataclass
class Format:
    """One format a job's records are rendered in."""

    name: str
    extensions: tuple[str, ...]  # the file name endings that name it; the first is the one written
    media_type: str  # a download's
    header: bytes = b""  # what a file of it starts with, once (CSV: its header line)
    lines: bool = True  # records are lines of text: a file can be cut at one, appended to, streamed, gzipped
    rendered: bool = True  # False: the result columns, rendered by whoever reads them
    code: Any = None  # how to render it: set by `pipeline.engine.render` when it is imported

    @property
    def extension(self) -> str:
        """What a file of it is named with (`.jsonl`)."""
        return self.extensions[0]


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("jsonl", (".jsonl", ".json"), "application/x-ndjson"),
        Format("csv", (".csv",), "text/csv; charset=utf-8", CSV_HEADER.encode()),
        Format("parquet", (".parquet",), "application/vnd.apache.parquet", lines=False),
        Format("columns", ("",), "application/octet-stream", lines=False, rendered=False),
    )
}
OUTPUTS = tuple(name for name, f in FORMATS.items() if f.rendered)  # what a file or a dataset holds
COMPRESSIONS = {"none": "", "gzip": ".gz", "zstd": ".zst"}  # a dataset's parts: the suffix of each


def check_format(name: str, within: tuple[str, ...] | dict[str, Any] = OUTPUTS, what: str = "format") -> str:
    """`name` when it is one of `within`; ValueError (one line) naming the choices otherwise."""
    if name not in within:
        raise ValueError(f"unknown {what} {name!r}; use {', '.join(within)}")
    return name


def named_format(path: str | None) -> str | None:
    """The format `path`'s extension names (behind a `.gz` too), or None."""
    return _names(path)[1]


def format_of(path: str | None, given: str | None) -> str:
    """The format of an output: `given` (--format), else the one `path`'s extension names (`.jsonl`
    or `.json`, `.csv`, `.parquet`, behind a `.gz` too), else jsonl. ValueError (one line) when
    the two disagree, or for `.parquet.gz` (Parquet compresses inside the file)."""
    gz, implied = _names(path)
    if given is not None and implied is not None and given != implied:
        raise ValueError(f"-o {path} names {implied}, not --format {given}: drop one or rename the file")
    fmt = given or implied or "jsonl"
    if gz and not FORMATS[fmt].lines:
        raise ValueError(f"-o {path}: Parquet compresses inside the file; name it .parquet, not .gz")
    return fmt


def _names(path: str | None) -> tuple[bool, str | None]:
    """(whether `path` ends in `.gz`, the output format its extension before that names or None)."""
    if path in (None, "-"):
        return False, None
    suffixes = [x.lower() for x in Path(path).suffixes]  # type: ignore[arg-type]
    gz = suffixes[-1:] == [".gz"]
    inner = suffixes[-2] if gz and len(suffixes) > 1 else None if gz or not suffixes else suffixes[-1]
    named = [name for name in OUTPUTS if inner in FORMATS[name].extensions]
    return gz, named[0] if named else None


def compress(data: bytes, compression: str) -> bytes:
    """`data` gzip- or zstd-compressed (a standard frame `gzip -d` / `zstd -d` reads), or as it is."""
    if compression == "gzip":
        return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    if compression == "zstd":
        return zstd_codec().compress(data, asbytes=True)
    return data


def decompress(data: bytes, compression: str) -> bytes:
    """Invert `compress`."""
    if compression == "gzip":
        return gzip.decompress(data)
    if compression == "zstd":
        import pyarrow as pa

        return pa.input_stream(pa.py_buffer(data), compression="zstd").read()
    return data


def zstd_codec() -> Any:
    """The zstd codec at hand: pyarrow's (the `parquet` extra); ValueError (one line) without it."""
    try:
        import pyarrow as pa

        return pa.Codec("zstd")
    except (ImportError, ValueError, NotImplementedError) as exc:
        raise ValueError(
            f"zstd needs pyarrow (pip install 'sudoku-batch[parquet]'), not at hand here: {exc}"
        ) from None
