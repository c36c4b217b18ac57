"""The client's side of a dataset output (`-o DIR/`): take the parts' headers, commit the dataset, merge it.

The workers write the part files (`pipeline.dataset`); the client never reads a record. It keeps
one entry per part from the headers the workers publish (file, lines, records, statistics), and
when every input line is answered it commits: renames the parts whose worker died between
publishing and renaming, deletes what is not the dataset (parts of an earlier run in the same
directory, of a delivery refused, `_temporary/`), writes `_manifest.json` (inputs, options, version,
every part with its lines and records, the summary figures) and `_SUCCESS` last. A reader that
waits for `_SUCCESS`, or reads the manifest's files, sees every input line once; after the commit
the directory holds nothing else.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from pydantic import BaseModel

from client.summary import Summary
from pipeline.dataset import MANIFEST, SUCCESS, TEMP_DIR, commit_part, decompress, job_marker
from pipeline.result import ChunkResult, ChunkStats
from pipeline.storage import Storage, StorageError, absolute, local_path, reason, storage_for

MANIFEST_VERSION = 1
PART = re.compile(r"^part-\d+-\d+\.(jsonl|csv|parquet)(\.gz|\.zst)?$")
OURS = {MANIFEST, SUCCESS, TEMP_DIR}


def is_dataset(output: str | None) -> bool:
    """True when `-o` names a dataset directory: a trailing slash, or an existing local directory."""
    if output in (None, "-"):
        return False
    assert output is not None
    if output.endswith("/"):
        return True
    path = local_path(output)
    return path is not None and os.path.isdir(path)


def dataset_url(output: str) -> str:
    """The dataset's directory as the workers will use it: absolute, without the trailing slash."""
    return absolute(output).rstrip("/") or "/"


class PartEntry(BaseModel):
    """One committed part file of the dataset."""

    file: str
    records: int
    chunk: int
    row: int
    input: str
    first_line: int
    last_line: int
    first_index: int
    last_index: int
    bytes: int


class Manifest(BaseModel):
    """`_manifest.json`: what the dataset is (readers: its `parts` are the table, in index order)."""

    manifest_version: int = MANIFEST_VERSION
    sudoku_batch: str
    job: str
    created: float
    committed: float
    inputs: list[str]
    options: dict[str, Any]
    records: int
    parts: list[PartEntry]
    summary: dict[str, Any]


def mark_directory(url: str, job: str) -> None:
    """Leave the job's marker in the dataset's `_temporary/`: workers check they see it before writing."""
    store = storage_for(url)
    try:
        store.makedirs(store.join(url, TEMP_DIR))
        store.put(store.join(url, TEMP_DIR, job_marker(job)), b"")
    except OSError as exc:
        raise StorageError(f"cannot write the dataset {url}/: {reason(exc)}") from None


def check_directory(url: str) -> Storage:
    """Make the dataset directory ready for a new job: created if missing; ValueError (one line) when it
    holds anything but a dataset (a dataset's files are replaced by this job's when it commits). The
    earlier dataset's `_SUCCESS` and manifest go first, so nobody takes the mix for a finished table."""
    store = storage_for(url)
    try:
        names = store.listdir(url)
        others = sorted(n for n in names if n not in OURS and not PART.match(n))
        if others:
            raise ValueError(
                f"{url}/ holds {others[0]!r}, which is not part of a dataset: give an empty or new directory"
            )
        store.makedirs(url)
        for name in (SUCCESS, MANIFEST):
            store.remove(store.join(url, name))
    except OSError as exc:
        raise StorageError(f"cannot write the dataset {url}/: {reason(exc)}") from None
    return store


class DatasetOutput:
    """Where a dataset job's parts are taken (`write`), then the dataset committed (`close`)."""

    fmt: str
    resumable = True  # the parts are durable where the workers wrote them: a killed collection goes on

    def __init__(self, url: str, fmt: str, job: str, meta: dict[str, str], summary: Summary) -> None:
        self.url = url
        self.fmt = fmt
        self.job = job
        self.meta = meta
        self.summary = summary
        self.store = storage_for(url)
        self.entries: dict[tuple[int, int], PartEntry] = {}
        self.temps: dict[tuple[int, int], str] = {}  # where each part was written first
        self.path = url + "/"

    def write(self, result: ChunkResult, start: int, stop: int) -> None:
        """Take a part's header (its records are in its file)."""
        self.take(result.header.chunk, result.header.row, result.header.input, result.header.stats)

    def take(self, chunk: int, row: int, input_name: str, stats: ChunkStats) -> None:
        """Keep one part's entry (from its header, or its statistics when an earlier collection took it)."""
        f = stats.file
        if f is None:
            raise ValueError(f"part {chunk}:{row} names no file: the job does not write a dataset")
        self.entries[(chunk, row)] = PartEntry(
            file=f.name, records=stats.n, chunk=chunk, row=row, input=input_name, first_line=f.first_line,
            last_line=f.last_line, first_index=f.first_index, last_index=f.last_index, bytes=f.bytes,
        )  # fmt: skip
        self.temps[(chunk, row)] = f.temp

    def durable(self) -> dict[str, Any]:
        """Where the output stands (for a resumed collection): the dataset's directory."""
        return {"path": self.path, "dataset": True, "format": self.fmt}

    def close(self, keep: bool, complete: bool = False) -> None:
        """Commit the dataset when the job is `complete`; otherwise leave it as it is (no `_SUCCESS`)."""
        if complete:
            self.commit()

    def commit(self) -> Manifest:
        """Put every part in place, delete what is not the dataset, write the manifest, then `_SUCCESS`."""
        store, url = self.store, self.url
        names = set(store.listdir(url))
        for key, entry in self.entries.items():
            if entry.file not in names and not commit_part(store, url, self.temps[key], entry.file):
                raise StorageError(f"part {entry.file} of the dataset {url}/ is missing")
        keep = {e.file for e in self.entries.values()}
        for name in names - keep:
            if PART.match(name):
                store.remove(store.join(url, name))  # an earlier run's part, or one refused
        store.remove_tree(store.join(url, TEMP_DIR))
        manifest = self.manifest()
        store.put(store.join(url, MANIFEST), manifest.model_dump_json(indent=1).encode())
        store.put(store.join(url, SUCCESS), b"")
        return manifest

    def manifest(self) -> Manifest:
        from client.first_run import package_version

        meta = self.meta
        options: dict[str, Any] = {"format": self.fmt, "compression": meta.get("compression", "none")}
        for key, kind in (("time_limit", float), ("portfolio", str), ("box", str), ("seed", int)):
            if meta.get(key):
                options[key] = kind(meta[key])
        options["escalate_after"] = float(meta.get("escalate_after") or 0)
        options["splits"] = bool(meta.get("splits"))  # the workers read the inputs in byte ranges
        parts = sorted(self.entries.values(), key=lambda e: (e.first_index, e.chunk, e.row))
        s = self.summary
        figures = {
            "records": s.n, "counts": s.counts, "wins": s.wins, "approx_costs": s.approx_costs,
            "time_max_ms": s.time_max_ms, "solve_s": s.solve_s, "cpu_s": s.cpu_s,
            "solver_cpu_s": s.solver_cpu_s, "problems": s.problems_total,
        }  # fmt: skip
        return Manifest(
            sudoku_batch=package_version(), job=self.job, created=float(meta.get("created") or 0.0),
            committed=time.time(), inputs=meta["inputs"].split("\n") if meta.get("inputs") else [],
            options=options, records=sum(p.records for p in parts), parts=parts, summary=figures,
        )  # fmt: skip


def read_manifest(url: str) -> Manifest:
    """The manifest of a committed dataset (ValueError, one line, when there is none)."""
    store = storage_for(url)
    if not store.exists(store.join(url, SUCCESS)):
        raise ValueError(f"{url}/ is no committed dataset (no {SUCCESS}): its job has not finished")
    return Manifest.model_validate_json(store.read(store.join(url, MANIFEST)))


def merge(url: str, output: Any, fmt: str) -> int:
    """Copy a committed dataset's records, part after part in index order, into one output (`client.output`:
    JSON Lines or CSV rows, one header; Parquet: a row group per part); return the records copied."""
    manifest = read_manifest(url)
    have = manifest.options.get("format")
    if have != fmt:
        raise ValueError(f"the dataset {url}/ holds {have} records: merge it with --format {have}")
    compression = str(manifest.options.get("compression", "none"))
    store = storage_for(url)
    for part in manifest.parts:
        data = store.read(store.join(url, part.file))
        if fmt == "parquet":
            from pipeline.render.parquet import read_parquet

            output.parquet_writer().write_table(read_parquet(data))
            continue
        body = decompress(data, compression)
        output.write_rows(body[body.find(b"\n") + 1 :] if fmt == "csv" else body)
    return manifest.records


__all__ = [
    "DatasetOutput",
    "Manifest",
    "check_directory",
    "dataset_url",
    "is_dataset",
    "mark_directory",
    "merge",
    "read_manifest",
]
