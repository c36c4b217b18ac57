"""The client's side of a dataset output (`-o DIR/`): take the parts' headers, commit the dataset, merge it.

The workers write the part files (`pipeline.engine.dataset`); the client never reads a record. A job owns its
directory from submission to commit (`claim_directory`), then commits only what its part entries name
(docs/pipeline.md): a reader that waits for `_SUCCESS` sees every input line once, and nothing else."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from client.store import input_names, job_cost
from client.summary import Summary
from client.target import alive
from pipeline.contract.formats import COMPRESSIONS, FORMATS, OUTPUTS, decompress
from pipeline.contract.part import Part, PartStats
from pipeline.engine.dataset import (
    CLAIM,
    MANIFEST,
    SUCCESS,
    TEMP_DIR,
    Claim,
    check_claim,
    commit_part,
    read_claim,
)
from pipeline.engine.storage import (
    TEMP_PREFIX,
    Storage,
    StorageError,
    absolute,
    local_path,
    storage_errors,
    storage_for,
)

if TYPE_CHECKING:
    from client.output import Output

MANIFEST_VERSION = 1
PART = re.compile(
    rf"^part-\d+-\d+({'|'.join(re.escape(FORMATS[f].extension) for f in OUTPUTS)})"
    rf"({'|'.join(re.escape(s) for s in COMPRESSIONS.values() if s)})?$"
)
TOKEN = re.compile(rf"^{CLAIM}\.\d+$")  # a takeover's token: `_CLAIM.<generation>`
OURS = {MANIFEST, SUCCESS, TEMP_DIR, CLAIM}
CLAIM_TRIES = 3  # a claim released between our create and our read: tried again


def is_dataset(output: str | None) -> bool:
    """True when `-o` names a dataset directory: a trailing slash, or an existing local directory."""
    if output is None or output == "-":
        return False
    path = local_path(output)
    return output.endswith("/") or path is not None and os.path.isdir(path)


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
    cpu_seconds: float = 0.0  # the workers' CPU time for the job at its commit (`JobStatus.cpu_seconds`)
    chunk_seconds: float = 0.0  # the wall time of its chunks' runs, summed


class DirectoryClaimed(ValueError):
    """A dataset directory another job owns while it lives (the message names it and how to free it)."""


def check_directory(url: str) -> Storage:
    """ValueError (one line) when the dataset directory holds anything but a dataset: a job writes only into
    a new, empty or dataset directory (what an earlier job left is cleared once this one owns it)."""
    store = storage_for(url)
    with storage_errors(f"cannot write the dataset {url}/"):
        names = store.listdir(url)
    others = [
        n for n in names if not (n in OURS or PART.match(n) or TOKEN.match(n) or n.startswith(TEMP_PREFIX))
    ]
    if others:
        raise ValueError(
            f"{url}/ holds {min(others)!r}, which is not part of a dataset: give an empty or new directory"
        )
    return store


def claim_directory(url: str, claim: Claim, lives: Callable[[Claim], bool]) -> None:
    """Make `claim`'s job the one owner of the dataset directory (`_CLAIM`, created exclusively and whole),
    then clear what an earlier job left there. A claim whose job no longer `lives` is taken over through the
    exclusive token `_CLAIM.<generation>` (of two jobs taking it over only one wins); DirectoryClaimed (one
    line naming the owner and how to free the directory) while its job lives."""
    store = storage_for(url)
    path = store.join(url, CLAIM)
    with storage_errors(f"cannot write the dataset {url}/"):
        store.makedirs(url)
        for _ in range(CLAIM_TRIES):
            if store.create(path, claim.model_dump_json().encode()):
                break
            held = read_claim(store, url)
            if held is None:
                continue  # its job committed meanwhile
            if lives(held):
                raise DirectoryClaimed(claimed_by(url, held))
            ours = claim.model_copy(update={"generation": held.generation + 1})
            if not store.create(
                store.join(url, f"{CLAIM}.{ours.generation}"), ours.model_dump_json().encode()
            ):
                raise DirectoryClaimed(f"{url}/: another job is taking it over from job {held.job}")
            store.put(path, ours.model_dump_json().encode())
            break
        else:
            raise DirectoryClaimed(f"{url}/: jobs keep claiming and committing it; give another directory")
        for name in store.listdir(url):
            if name in (SUCCESS, MANIFEST) or PART.match(name):
                store.remove(store.join(url, name))
        store.remove_tree(store.join(url, TEMP_DIR))
        store.makedirs(store.join(url, TEMP_DIR))


def claim_lives(held: Claim, meta: dict[str, str], broker: str) -> bool:
    """Whether the job of a claim may still write its directory, as this client can tell: known to its store
    (`meta`) and not failed; else gone only when its broker is ours (purged or expired there) or its
    process, on this host, is gone. What cannot be told counts as alive."""
    if meta:
        return meta.get("state") != "failed"
    if held.broker:
        return held.broker != broker
    return held.host != socket.gethostname() or held.pid <= 0 or alive(held.pid)


def claimed_by(url: str, held: Claim) -> str:
    """The one line refusing a second job: whose the directory is, and how to free it."""
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(held.claimed))
    what = f"{url}/ belongs to job {held.job} (since {since}"
    if not held.broker:
        return (
            f"{what}, run without a broker by process {held.pid} on {held.host}): wait for it, give another "
            f"directory, or delete {url}/{CLAIM} if that process is gone"
        )
    return (
        f"{what}, broker {held.broker}): wait for it, collect it (sudoku-batch collect {held.job} -o {url}/) "
        f"or give it up (sudoku-batch purge {held.job}), or give another directory"
    )


class DatasetOutput:
    """Where a dataset job's parts are taken (`write`), then the dataset committed (`close`)."""

    fmt: str
    resumable = True  # the parts are durable where the workers wrote them: a killed collection goes on

    def __init__(
        self,
        url: str,
        fmt: str,
        job: str,
        meta: dict[str, str],
        summary: Summary,
        cost: Callable[[], tuple[float, float]] | None = None,
    ) -> None:
        self.url = url
        self.fmt = fmt
        self.job = job
        self.meta = meta
        self.cost = cost or (lambda: job_cost(job, meta))  # (CPU s, chunk s) read at the commit
        self.summary = summary
        self.store = storage_for(url)
        self.entries: dict[tuple[int, int], PartEntry] = {}
        self.temps: dict[tuple[int, int], str] = {}  # where each part was written first
        self.path = url + "/"

    def write(self, result: Part, start: int, stop: int) -> None:
        """Take a part's header (its records are in its file)."""
        self.take(result.header.chunk, result.header.row, result.header.input, result.header.stats)

    def take(self, chunk: int, row: int, input_name: str, stats: PartStats) -> None:
        """Keep one part's entry (from its header, or its statistics when an earlier collection took it); a
        part of no records (a split owning no puzzle line) has no file and no entry."""
        f = stats.file
        if f is None and not stats.n:
            return
        if f is None:
            raise ValueError(f"part {chunk}:{row} names no file: the job does not write a dataset")
        self.entries[(chunk, row)] = PartEntry(
            file=f.name,
            records=stats.n,
            chunk=chunk,
            row=row,
            input=input_name,
            first_line=f.first_line,
            last_line=f.last_line,
            first_index=f.first_index,
            last_index=f.last_index,
            bytes=f.bytes,
        )
        self.temps[(chunk, row)] = f.temp

    def durable(self) -> dict[str, Any]:
        """Where the output stands (for a resumed collection): the dataset's directory."""
        return {"path": self.path, "dataset": True, "format": self.fmt}

    def close(self, keep: bool) -> None:
        """Nothing: the dataset is committed by `commit` once complete (else left as it is, no `_SUCCESS`)."""

    def commit(self) -> Manifest:
        """Put every part in place, delete this job's parts no entry names, write the manifest, then
        `_SUCCESS`, then release the directory. StorageError (nothing deleted) when the directory is no longer
        this job's; a dataset this job committed already is left as it is."""
        store, url = self.store, self.url
        with storage_errors(f"cannot commit the dataset {url}/"):
            if read_claim(store, url) is None and store.exists(store.join(url, SUCCESS)):
                done = read_manifest(url)
                if done.job == self.job:
                    return done  # a collection run again
            check_claim(store, url, self.job)
            names = set(store.listdir(url))
            for key, entry in self.entries.items():
                if entry.file not in names and not commit_part(store, url, self.temps[key], entry.file):
                    raise StorageError(f"part {entry.file} of the dataset {url}/ is missing")
            keep = {e.file for e in self.entries.values()}
            for name in names - keep:
                if PART.match(name):  # a refused delivery's (the directory held no other part once claimed)
                    store.remove(store.join(url, name))
            manifest = self.manifest()
            store.put(store.join(url, MANIFEST), manifest.model_dump_json(indent=1).encode())
            store.put(store.join(url, SUCCESS), b"")
            store.remove_tree(store.join(url, TEMP_DIR))
            for name in store.listdir(url):  # the takeover tokens, then the claim: the next job may have it
                if TOKEN.match(name):
                    store.remove(store.join(url, name))
            store.remove(store.join(url, CLAIM))
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
            "records": s.n,
            "counts": s.counts,
            "wins": s.wins,
            "approx_costs": s.approx_costs,
            "time_max_ms": s.time_max_ms,
            "solve_s": s.solve_s,
            "cpu_s": s.cpu_s,
            "solver_cpu_s": s.solver_cpu_s,
            "problems": s.problems_total,
        }
        cpu_s, chunk_s = self.cost()
        return Manifest(
            sudoku_batch=package_version(),
            job=self.job,
            created=float(meta.get("created") or 0.0),
            committed=time.time(),
            inputs=input_names(meta),
            options=options,
            records=sum(p.records for p in parts),
            parts=parts,
            summary=figures,
            cpu_seconds=cpu_s,
            chunk_seconds=chunk_s,
        )


def read_manifest(url: str) -> Manifest:
    """The manifest of a committed dataset (ValueError, one line, when there is none)."""
    store = storage_for(url)
    if not store.exists(store.join(url, SUCCESS)):
        raise ValueError(f"{url}/ is no committed dataset (no {SUCCESS}): its job has not finished")
    return Manifest.model_validate_json(store.read(store.join(url, MANIFEST)))


def copy_dataset(url: str, output: Output, fmt: str) -> int:
    """Copy a committed dataset's records, part after part in index order, into one output (`client.output`:
    JSON Lines or CSV rows, one header; Parquet: a row group per part); return the records copied."""
    manifest = read_manifest(url)
    have = manifest.options.get("format")
    if have != fmt:
        raise ValueError(f"the dataset {url}/ holds {have} records: merge it with --format {have}")
    compression = str(manifest.options.get("compression", "none")) if FORMATS[fmt].lines else "none"
    store = storage_for(url)
    for part in manifest.parts:  # a Parquet file is compressed inside
        output.write_file(decompress(store.read(store.join(url, part.file)), compression))
    return manifest.records
