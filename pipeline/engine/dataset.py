"""A job's output as a dataset: each part a file written under `_temporary/` by the process that solved it,
renamed into place once the job accepted it; the claim (`_CLAIM`) naming the job is checked before each
write and rename, so two jobs' parts never mix (docs/pipeline.md, Datasets)."""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pipeline.contract.formats import COMPRESSIONS, FORMATS
from pipeline.contract.part import Part, PartFile
from pipeline.contract.tasks import JOB_ID_PATTERN, MAX_NAME_CHARS, ChunkTask, Dataset
from pipeline.engine.port import ChunkPort
from pipeline.engine.render import part_file
from pipeline.engine.roots import DataRoots
from pipeline.engine.solve import worker_name
from pipeline.engine.storage import Storage, StorageError, storage_errors, storage_for

TEMP_DIR = "_temporary"  # where parts are written before they are renamed into place (readers skip `_` names)
MANIFEST = "_manifest.json"
SUCCESS = "_SUCCESS"
CLAIM = "_CLAIM"  # the job that owns the directory until it commits (`Claim`)
MAX_CLAIM_BYTES = 4096  # a claim read is at most this long (it is a few hundred bytes)
HELP_AFTER_S = 2.0  # a split waiting this long for its offsets counts the splits before it itself
WAIT_MAX_S = 0.2  # the longest pause between two looks at a split's offsets
CHECKED_JOBS = 1024  # jobs whose storage this process has checked, remembered


class SplitPort(Protocol):
    """What a split's run needs beyond `ChunkPort`: publishing its counts, and reading its offsets."""

    def split_read(self, job: str, chunk: int, input_no: int, lines: int, entries: int) -> None:
        """Record how many lines and entries split `chunk` (of input `input_no`) holds."""

    def split_offsets(self, job: str, chunk: int) -> tuple[int, int] | None:
        """(first line, first index) of split `chunk`, once every split before it is counted."""

    def count_frontier(self, job: str) -> bool:
        """Count the first split nobody has counted yet (its worker is slow or gone); False when none."""


def part_name(chunk: int, row: int, dataset: Dataset) -> str:
    """The file name of the part of `chunk` starting at `row`."""
    return f"part-{chunk:06d}-{row:06d}{FORMATS[dataset.format].extension}{COMPRESSIONS[dataset.compression]}"


_checked: OrderedDict[str, None] = OrderedDict()


def check_storage(task: ChunkTask) -> None:
    """StorageError unless this process can reach the job's storage: at every delivery, the claim names the
    job; once per job, a file can be written in `_temporary/` and the split's input is the one submitted."""
    if task.dataset is not None:
        url, store = task.dataset.url, storage_for(task.dataset.url)
        check_claim(store, url, task.job)
        if task.job not in _checked:
            probe = store.join(
                url, TEMP_DIR, f".probe-{worker_name().replace(':', '-')}-{uuid.uuid4().hex[:8]}"
            )
            with storage_errors(f"cannot write the dataset {url}/"):
                store.put(probe, b"")
                store.remove(probe)
    if task.job in _checked:
        return
    if task.split is not None:
        from pipeline.engine.splits import check_input

        check_input(storage_for(task.split.url), task.split)
    _checked[task.job] = None
    while len(_checked) > CHECKED_JOBS:
        _checked.popitem(last=False)


class Claim(BaseModel):
    """`_CLAIM`: the job that owns a dataset directory, and what tells whether it still lives (its broker, or
    the host and process of a job without one). `generation` counts the takeovers of the directory."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job: str = Field(pattern=JOB_ID_PATTERN)
    generation: int = Field(default=0, ge=0, lt=1 << 31)
    broker: str = Field(default="", max_length=MAX_NAME_CHARS)  # host:port/db of the job's broker; "" none
    host: str = Field(default="", max_length=255)
    pid: int = Field(default=0, ge=0, lt=1 << 31)
    claimed: float = Field(default=0.0, ge=0)


def read_claim(storage: Storage, url: str) -> Claim | None:
    """The claim of the dataset directory `url`; None when it has none; StorageError (one line) when it
    cannot be read or is no claim."""
    path = storage.join(url, CLAIM)
    with storage_errors(f"cannot read {path}"):
        try:
            with storage.open_read(path) as f:
                data = f.read(MAX_CLAIM_BYTES + 1)
        except FileNotFoundError:
            return None
    try:
        if len(data) > MAX_CLAIM_BYTES:
            raise ValueError("too long")
        return Claim.model_validate_json(data)
    except ValueError:  # a pydantic ValidationError too
        raise StorageError(
            f"{path} is no claim of sudoku-batch's: delete it if no job writes {url}/"
        ) from None


def check_claim(storage: Storage, url: str, job: str) -> None:
    """StorageError (one line) unless the directory's claim names `job`: its directory was deleted,
    committed or taken over by another job (or is not the client's: a shared mount missing on this host)."""
    claim = read_claim(storage, url)
    if claim is None:
        raise StorageError(
            f"cannot see the dataset {url}/ as its client made it (no {CLAIM} there: is the shared storage "
            "mounted on this host? or the directory was deleted, or committed)"
        )
    if claim.job != job:
        raise StorageError(
            f"the dataset {url}/ was taken over by job {claim.job}: job {job} writes no more there"
        )


@dataclass
class Prepared:
    """A chunk ready to run: its rows known (a split read), its parts going to the dataset when it has one."""

    task: ChunkTask
    port: ChunkPort
    valid: int  # rows [0, valid) are puzzles; the rest are invalid lines (`reasons`)
    reasons: list[str]


def check_roots(task: ChunkTask, roots: DataRoots | None) -> None:
    """Refuse a split or dataset outside this worker's data roots (OutsideRoots) before anything is opened;
    `roots` None: a process of the user's own command, which reads and writes what its user can."""
    if roots is None:
        return
    if task.split is not None:
        roots.check(task.split.url, "read the input")
    if task.dataset is not None:
        roots.check(task.dataset.url, "write the dataset")


def prepare(port: ChunkPort, task: ChunkTask, roots: DataRoots | None = None) -> Prepared:
    """Check the task's locations (`check_roots`), then the storage, read a split task's lines (publishing
    its counts at once) and wrap the port so each part is written to the dataset."""
    check_roots(task, roots)
    check_storage(task)
    valid, reasons = len(task), []
    if task.split is not None:
        from pipeline.engine.splits import read_split

        read = read_split(task)
        port.split_read(task.job, task.chunk, task.split.input, read.lines, read.entries)  # type: ignore[attr-defined]
        task, valid, reasons = read.task, read.valid, read.reasons
    if task.dataset is not None:
        port = DatasetPort(port, task, storage_for(task.dataset.url))
    return Prepared(task, port, valid, reasons)


class JobStopped(RuntimeError):
    """The job was stopped (purged) while a part waited for its split's offsets."""


class DatasetPort:
    """A `ChunkPort` that writes each part to the dataset, then publishes its header; the rest of the port's
    calls go to the port it wraps."""

    arena = None  # a dataset part is written from its columns, never rendered into the wrapped port's arena

    def __init__(self, port: ChunkPort, task: ChunkTask, storage: Storage) -> None:
        assert task.dataset is not None
        self.port = port
        self.task = task
        self.dataset = task.dataset
        self.storage = storage
        self._offsets: tuple[int, int] | None = None if task.split is not None else (0, 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.port, name)

    def publish(self, part: Part) -> bool:
        """Write the part under `_temporary/`, publish its header, then rename it into place; a part refused
        leaves no file, a part of no rows is published with none."""
        if not len(part):
            head = part.header.model_copy(update={"format": self.dataset.format, "run_bytes": []})
            return self.port.publish(Part(head, b""))
        start = time.process_time()
        try:  # a split's lines and indices are offset by the splits before it (waited for)
            if self._offsets is None:
                self._offsets = wait_offsets(self.port, self.task)  # type: ignore[arg-type]
        except JobStopped:
            return False
        dl, di = self._offsets
        url, job = self.dataset.url, self.task.job
        check_claim(self.storage, url, job)  # another job's directory now: nothing of this job goes there
        staged = stage_part(self.storage, self.dataset, part, dl, di, start)
        if not self.port.publish(staged.part):
            with storage_errors(f"cannot delete a part refused from the dataset {url}/"):
                self.storage.remove(self.storage.join(url, staged.temp))
            return False
        check_claim(self.storage, url, job)
        commit_part(self.storage, url, staged.temp, staged.name)
        return True


@dataclass
class Staged:
    """A part written under `_temporary/`: the header-only part to publish, its temporary and final names."""

    part: Part
    temp: str
    name: str


def stage_part(
    storage: Storage, dataset: Dataset, part: Part, dl: int = 0, di: int = 0, cpu0: float | None = None
) -> Staged:
    """Write a part (held as columns; its lines and indices `dl` and `di` from where they belong) under the
    dataset's `_temporary/`, and make the header-only part that says where it is (CPU charged from `cpu0`)."""
    if part.columns is None:
        raise ValueError("a dataset part is written from its columns")
    start = time.process_time() if cpu0 is None else cpu0
    head = part.header
    index, lines = part.row_indices() + di, part.row_lines() + dl
    data = part_file(part.columns, head.input, index, lines, dataset.format, dataset.compression)
    name = part_name(head.chunk, head.row, dataset)
    temp = f"{TEMP_DIR}/{name}.{uuid.uuid4().hex[:12]}"
    with storage_errors(f"cannot write {storage.join(dataset.url, temp)}"):
        storage.put(storage.join(dataset.url, temp), data)
    size = sum(map(len, data))
    stats = head.stats
    problems = [p.model_copy(update={"index": p.index + di, "line": p.line + dl}) for p in stats.problems]
    lo_line, hi_line = (int(lines.min()), int(lines.max())) if len(lines) else (0, 0)
    lo_index, hi_index = (int(index.min()), int(index.max())) if len(index) else (0, 0)
    file = PartFile(
        name=name,
        temp=temp,
        input=head.input,
        bytes=size,
        first_line=lo_line,
        last_line=hi_line,
        first_index=lo_index,
        last_index=hi_index,
    )
    stats = stats.model_copy(
        update={"problems": problems, "cpu_s": stats.cpu_s + time.process_time() - start, "file": file}
    )
    header = head.model_copy(
        update={
            "format": dataset.format,
            "index_runs": [(f + di, c) for f, c in head.index_runs],
            "line_runs": [(f + dl, c) for f, c in head.line_runs],
            "run_bytes": [],
            "stats": stats,
        }
    )
    return Staged(Part(header, b""), temp, name)


def commit_part(storage: Storage, root: str, temp: str, name: str) -> bool:
    """Rename a published part into place (the worker right after publishing it, or the client committing
    the dataset when its worker died first); True when the file is in place."""
    with storage_errors(f"cannot rename a part into place in the dataset {root}/"):
        try:
            storage.rename(storage.join(root, temp), storage.join(root, name))
            return True
        except FileNotFoundError:  # renamed already (the worker and the client both tried)
            return storage.exists(storage.join(root, name))


def wait_offsets(port: SplitPort, task: ChunkTask) -> tuple[int, int]:
    """(first line - 1, first index) of a split task's split, once every split before it is counted (normally
    at once; one whose worker died is counted here after HELP_AFTER_S); JobStopped when the job stops."""
    began = time.monotonic()
    pause = 0.005
    while True:
        got = port.split_offsets(task.job, task.chunk)
        if got is not None:
            return got[0] - 1, got[1]
        if port.stopped(task.job):  # type: ignore[attr-defined]
            raise JobStopped(f"job {task.job} was stopped")
        if time.monotonic() - began > HELP_AFTER_S and port.count_frontier(task.job):
            continue
        time.sleep(pause)
        pause = min(WAIT_MAX_S, 2 * pause)
