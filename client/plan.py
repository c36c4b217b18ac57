"""A job's plan, settled before its producer starts: its spec, its inputs' fingerprints, whether the
workers read them in splits (and may, under their data roots), its dataset's directory, and whether it
is small enough to solve in this process rather than start the pool."""

from __future__ import annotations

import hashlib
import io
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, TypeAdapter

from client.dataset import check_directory, dataset_url
from client.store import Checkpoint, input_names, submission_state
from client.transport import INLINE_BYTES
from pipeline.contract.formats import COMPRESSIONS, FORMATS, OUTPUTS, zstd_codec
from pipeline.contract.tasks import DEFAULT_PRIORITY, MAX_NAME_CHARS, Dataset
from pipeline.engine.roots import DataRoots
from pipeline.engine.storage import absolute, storage_for

Source = str | Path | IO[bytes] | Iterable[str]
HEAD_BYTES = 1 << 20  # a file input is fingerprinted by its size and the SHA-256 of this many first bytes
SMALL_GRID_CHARS = 2 * 81 + 1  # the longest line of a 9x9 grid: 81 values with separators


class ResumeRefused(ValueError):
    """A resume cannot go on: the job is complete or still producing, or the inputs are not the job's."""


class InputPrint(BaseModel):
    """A file input's fingerprint: what a resume compares before reading it again."""

    size: int
    head: str  # SHA-256 (hex, 32 digits) of the first HEAD_BYTES bytes


PRINTS = TypeAdapter(list[InputPrint | None])


def fingerprint(source: Source) -> InputPrint | None:
    """Size and head digest of a file input; None for stdin, streams, iterables and unreadable paths."""
    if not isinstance(source, (str, Path)) or str(source) == "-":
        return None
    text = str(source)
    try:
        head = hashlib.sha256(_head(text)).hexdigest()[:32]
        return InputPrint(size=storage_for(text).size(text), head=head)
    except OSError:
        return None


def _head(text: str) -> bytes:
    with storage_for(text).open_read(text) as f:
        return f.read(HEAD_BYTES)


def splittable(inputs: list[tuple[str, Source]], box: str | None) -> tuple[list[str] | None, str]:
    """The inputs as the workers would read them in splits (absolute paths or URLs), or None and why they
    cannot be: stdin, a stream, a compressed file, or one holding grids written over several lines."""
    from pipeline.engine.lines import has_grid_rows  # here: it loads numba (see `opened`)

    urls = []
    for name, src in inputs:
        if not isinstance(src, (str, Path)) or str(src) == "-":
            return None, f"{name} is not a file the workers can read"
        text = str(src)
        try:
            head = _head(text)
        except OSError as exc:
            return None, f"{name}: {exc}"
        if head[:2] == b"\x1f\x8b":
            return None, f"{name} is compressed: workers read plain lines only"
        if has_grid_rows(head, box):
            return None, f"{name} holds grids written over several lines (splits need one puzzle a line)"
        urls.append(absolute(text))
    return urls, ""


def uncovered(fleet: dict[str, DataRoots], location: str) -> str | None:
    """The first live worker (of `fleet`: name -> its data roots) that may not read or write `location`, or
    None when every one may (and when no worker is live)."""
    return next((name for name, roots in fleet.items() if not roots.allows(location)), None)


def split_plan(
    inputs: list[tuple[str, Source]], box: str | None, splits: bool | None, fleet: dict[str, DataRoots]
) -> tuple[list[str] | None, str | None]:
    """The inputs the workers read in splits (`splittable`, under every live worker's data roots), or None
    and, when only the roots stand in the way, a note that this machine reads them; ValueError if forced."""
    urls, why = splittable(inputs, box)
    if urls is None:
        if splits:
            raise ValueError(f"cannot read the inputs in splits: {why}")
        return None, None
    unread = next((u for u in urls if not fleet or uncovered(fleet, u) is not None), None)
    if unread is None:
        return urls, None
    where = unread.rsplit("/", 1)[0] or "/"
    if splits:
        raise ValueError(
            f"cannot read the inputs in splits: workers read no files under {where} (start them with "
            f"--data-root {where})"
        )
    return None, (
        f"workers read no files under {where}: this machine reads it; start workers with --data-root "
        f"{where} to let them read splits"
    )


def fleet_roots(published: dict[str, list[str]]) -> dict[str, DataRoots]:
    """Live worker -> its data roots, from what each published (`RedisJobStore.worker_roots`); a worker whose
    roots do not parse here has none."""
    fleet = {}
    for name, texts in published.items():
        try:
            fleet[name] = DataRoots.parse(texts)
        except ValueError:
            fleet[name] = DataRoots.parse([])
    return fleet


def new_job_id() -> str:
    """A fresh job id (uuid4 hex)."""
    return uuid.uuid4().hex


@dataclass
class JobSpec:
    """What a job solves and how (and, to resume it, what its file inputs looked like)."""

    job: str
    inputs: list[str]
    box: str | None = None
    time_limit: float | None = None
    portfolio: str | None = None
    prints: list[InputPrint | None] = field(default_factory=list)
    seed: int | None = None  # the solvers' seeds derive from it (None: from the job id, new every job)
    escalate_after: float | None = None  # seconds before a slow puzzle is escalated to idle processes
    format: str = "columns"  # what the solving processes render the records in (`pipeline.contract.tasks`)
    dataset: str | None = None  # the directory the solving processes write their parts to (`-o DIR/`)
    compression: str = "none"  # of a dataset's JSON Lines or CSV parts
    splits: list[str] | None = None  # the inputs as the workers read them, in splits (None: read here)
    column: str | None = None  # a CSV input's puzzle column as named (None: a header naming one, if any)
    priority: str = DEFAULT_PRIORITY  # its chunks' class on the broker (`pipeline.contract.tasks.PRIORITIES`)

    def meta(self) -> dict[str, str]:
        """The job's metadata as stored (strings only), with the checkpoint at the start."""
        out = {
            "created": f"{time.time():.6f}",
            "state": "producing",
            "inputs": "\n".join(self.inputs),
            "prints": PRINTS.dump_json(self.prints).decode(),
            "checkpoint": Checkpoint().model_dump_json(),
            "format": self.format,
            "priority": self.priority,
        }
        for key in ("box", "time_limit", "portfolio", "seed", "escalate_after", "dataset", "column"):
            value = getattr(self, key)
            if value is not None:
                out[key] = str(value)
        if self.dataset is not None:
            out["compression"] = self.compression
        if self.splits is not None:
            out["splits"] = "\n".join(self.splits)
        return out

    def task_dataset(self) -> Dataset | None:
        """Where a task's parts go (None: back through the job store)."""
        if self.dataset is None:
            return None
        return Dataset(url=self.dataset, format=self.format, compression=self.compression)  # type: ignore[arg-type]

    @classmethod
    def from_meta(cls, job: str, meta: dict[str, str]) -> JobSpec:
        """The spec a job was submitted with, read back from its metadata."""
        limit = meta.get("time_limit")
        inputs = input_names(meta)
        prints = PRINTS.validate_json(meta["prints"]) if meta.get("prints") else []
        prints += [None] * (len(inputs) - len(prints))
        seed, escalate = meta.get("seed"), meta.get("escalate_after")
        splits = meta["splits"].split("\n") if meta.get("splits") else None
        return cls(
            job,
            inputs,
            meta.get("box"),
            float(limit) if limit else None,
            meta.get("portfolio"),
            prints,
            int(seed) if seed else None,
            float(escalate) if escalate else None,
            meta.get("format", "columns"),
            meta.get("dataset"),
            meta.get("compression", "none"),
            splits,
            meta.get("column"),
            meta.get("priority", DEFAULT_PRIORITY),  # an unknown class: the default (`message_priority`)
        )


def opened(inputs: list[tuple[str, Source]]) -> list[tuple[str, Source]]:
    """The inputs with `-` as stdin, peeked: a small input is read whole now (so the job can tell it is
    small)."""
    from pipeline.engine.inputs import peek_stdin  # here: it loads numba, which `status` or `jobs` never need

    return [(n, peek_stdin(INLINE_BYTES)[0] if isinstance(s, str) and s == "-" else s) for n, s in inputs]


def small_inputs(inputs: list[tuple[str, Source]], escalate: bool = True) -> bool:
    """True when solving in-process beats starting the pool: at most INLINE_BYTES of lines short enough for
    9x9 grids (a 25x25 grid may take seconds: the pool), or one puzzle of any size when no escalation could
    hand it to the pool's idle processes (`escalate` False)."""
    texts: list[str] = []
    for _, src in inputs:
        if isinstance(src, (str, Path)):
            try:
                with open(src, "rb") as f:
                    texts.append(f.read(INLINE_BYTES + 1).decode("utf-8", "replace"))
            except OSError:
                return False
        elif isinstance(src, io.BytesIO):
            texts.append(bytes(src.getbuffer()[: INLINE_BYTES + 1]).decode("utf-8", "replace"))
        elif isinstance(src, Sequence) and len(src) <= INLINE_BYTES:
            texts.append("".join(f"{t}\n" for t in src))
        else:
            return False
    if sum(map(len, texts)) > INLINE_BYTES:
        return False
    lines = [ln for t in texts for ln in t.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return max(map(len, lines), default=0) <= SMALL_GRID_CHARS or (len(lines) <= 1 and not escalate)


def check_columns(inputs: list[tuple[str, Source]], column: str | None) -> None:
    """ValueError (one line) before the job starts when a file's first line does not name `column`."""
    if column is None:
        return
    if not column.strip() or len(column) > MAX_NAME_CHARS:
        raise ValueError(f"column {column[:80]!r}: a CSV header's name, 1 to {MAX_NAME_CHARS:,} characters")
    from pipeline.engine.inputs import check_column  # here: it loads numba (see `opened`)

    for _, src in inputs:
        if isinstance(src, (str, Path)) and str(src) != "-":
            check_column(src, column)


def dataset_plan(
    inputs: list[tuple[str, Source]],
    dataset: str | None,
    format: str,
    compression: str,
    splits: bool | None,
    box: str | None,
    fleet: Callable[[], dict[str, DataRoots]] | None,
) -> tuple[str | None, list[str] | None, str | None]:
    """The dataset's directory (checked), the inputs the workers read in splits, if any, and a note when this
    machine reads them (outside the workers' data roots); ValueError (one line) for options that do not go
    together, or a dataset outside a live worker's data roots. `fleet`: None when embedded."""
    if format not in FORMATS:
        raise ValueError(f"format {format!r}: use one of {', '.join(FORMATS)}")
    if dataset is None:
        if splits:
            raise ValueError("splits need a dataset output (a directory: -o DIR/)")
        if compression != "none":
            raise ValueError("compression applies to a dataset's parts (-o DIR/); name a file .gz instead")
        return None, None, None
    if format not in OUTPUTS:
        raise ValueError(f"a dataset's format is one of {', '.join(OUTPUTS)}, not {format!r}")
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression {compression!r}: use one of {', '.join(COMPRESSIONS)}")
    if compression == "zstd" and FORMATS[format].lines:
        zstd_codec()
    if format == "parquet":
        from pipeline.engine.render.parquet import INSTALL_HINT, installed

        if not installed():
            raise ValueError(f"Parquet needs pyarrow: {INSTALL_HINT}")
    url = dataset_url(dataset)
    if fleet is None:
        if splits:
            raise ValueError("splits need a broker: local processes read what this process reads")
        check_directory(url)
        return url, None, None
    live = fleet()
    refused = uncovered(
        live, url
    )  # it would fail the job at its first chunk (one joining later fails it then)
    if refused is not None:  # before the directory is touched: a dataset there stays as it is
        raise ValueError(
            f"the dataset {url}/ lies outside the data roots of live worker {refused} "
            f"({', '.join(live[refused].texts) or 'none'}): start the workers with --data-root {url} "
            "(or a directory above it) to let them write it"
        )
    check_directory(url)
    if splits is False:
        return url, None, None
    urls, note = split_plan(inputs, box, splits, live)
    return url, urls, note


def resumable(job_id: str, meta: dict[str, str]) -> JobSpec:
    """The spec of a job whose submission can be resumed now; ResumeRefused saying why not otherwise."""
    if not meta or "created" not in meta:
        raise ResumeRefused(f"no job {job_id} (never created, purged, or expired)")
    submission, silent = submission_state(meta)
    if not submission:
        raise ResumeRefused(f"job {job_id} records no submission checkpoint: it cannot be resumed")
    if submission == "complete":
        raise ResumeRefused(f"job {job_id} was submitted completely: nothing to resume (collect it)")
    if submission == "cancelled":
        raise ResumeRefused(f"job {job_id} was cancelled: submit its inputs again as a new job")
    if submission == "running":
        raise ResumeRefused(
            f"job {job_id}: its producer beat {silent or 0:.0f} s ago and may still be running; "
            "stop it, or retry a few seconds after it died"
        )
    return JobSpec.from_meta(job_id, meta)


def resumed_inputs(
    spec: JobSpec, sources: Sequence[Source] | None, given: dict[str, Any]
) -> list[tuple[str, Source]]:
    """The inputs a resume of `spec` reads (`sources`, or None: the recorded paths reopened), opened;
    ResumeRefused (one line) when an option `given` is not the job's, or an input is not the one
    submitted (its count, or a file's size and first MB)."""
    job = spec.job
    for key, value in given.items():
        if value is not None and value != getattr(spec, key):
            raise ResumeRefused(
                f"job {job} was submitted with {key} {getattr(spec, key)}, not {value}: "
                "a resume keeps the job's options"
            )
    if sources is None and spec.splits is not None:
        sources = list(spec.splits)
    elif sources is None:
        for name in spec.inputs:
            if name == "-" or not Path(name).is_file():
                what = "stdin" if name == "-" else f"{name}: no such file here"
                raise ResumeRefused(f"job {job} read {what}: give its inputs again after the job id")
        sources = list(spec.inputs)
    if len(sources) != len(spec.inputs):
        raise ResumeRefused(
            f"job {job} has {len(spec.inputs)} inputs ({', '.join(spec.inputs)}), not {len(sources)}"
        )
    for name, was, src in zip(spec.inputs, spec.prints, sources, strict=True):
        if was is not None and fingerprint(src) != was:
            raise ResumeRefused(f"{src}: not the input submitted as {name} (size or first MB differ)")
    return opened(list(zip(spec.inputs, sources, strict=True)))
