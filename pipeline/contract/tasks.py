"""The task messages between client and workers: what a chunk asks for, checked before anything runs.

`ChunkTask` (solve these puzzles) and `GenerateTask` (`pipeline.contract.generate`) ride the same producer,
outbox and collector; Celery reaches the workers' tasks by name (JSON kwargs `{"task": ...}`), a solve
message naming its chunk (`ChunkRef`). Every number is bounded, so a hand-made message cannot make a worker
allocate without limit.
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipeline.contract.formats import COMPRESSIONS, FORMATS, OUTPUTS, check_format
from pipeline.contract.runs import Runs, split_texts

SOLVE_TASK_NAME = "sudoku_batch.solve_chunk"
GENERATE_TASK_NAME = "sudoku_batch.generate_chunk"
HELPER_TASK_NAME = "sudoku_batch.race_puzzle"  # a helper searching one escalated puzzle of another's chunk
DEFAULT_QUEUE = "sudoku_batch"
# the pipeline's protocol: tasks, parts and keys; a peer of another version is refused in one line (4: a
# split carries its input's stamp, a dataset has a `_CLAIM`; 5: result columns carry times in ns)
VERSION = 5
# what a worker renders a job's records in (`pipeline.contract.formats`); a dataset's, compressed how
Format = Annotated[str, AfterValidator(partial(check_format, within=FORMATS))]
OutputFormat = Annotated[str, AfterValidator(partial(check_format, within=OUTPUTS))]
Compression = Annotated[str, AfterValidator(partial(check_format, within=COMPRESSIONS, what="compression"))]
JOB_ID_PATTERN = r"^[0-9a-f]{8,64}$"

# Fair share between jobs: kombu's Redis transport keeps one list per priority (0 first: `priority_steps`,
# `sep`, the same on the clients and the workers) and a worker pops the first non-empty one. A chunk
# message's priority is its job's class (`PRIORITIES`: high, normal, low) plus a least-attained-service
# level from the chunk's number (chunks aim at a second of solving each): a job's first chunk goes ahead of
# a long job's later ones in the same class, and every chunk of a class ahead of a lower class's.
PRIORITIES: dict[str, tuple[int, int]] = {"high": (0, 2), "normal": (3, 6), "low": (7, 9)}
DEFAULT_PRIORITY = "normal"
PRIORITY_STEPS = list(range(10))  # kombu's `priority_steps`: one list per priority
# kombu's `sep`, its default: lists `<queue>\x06\x16<priority>`, 0 is `<queue>` itself. Not Celery docs'
# ":": kombu joins its exchange bindings with `sep` too, and a kombu client or tool with the default (Flower,
# a plain `kombu.Connection`) could no longer read the workers' bindings (its publish failed on them).
PRIORITY_SEP = "\x06\x16"
# a queue's name: no `sep` in it (kombu cuts a popped list's name at its last `sep`), no space, bounded
QueueName = Annotated[str, Field(pattern=r"^[^\x06\x16\s]{1,200}$")]
BROKER_PRIORITIES = {  # kombu's Redis transport options for them, the same on the clients and the workers
    "priority_steps": PRIORITY_STEPS,
    "sep": PRIORITY_SEP,
    "queue_order_strategy": "priority",
}
LEVEL_GROWTH = 4  # chunk numbers 1-3 are a job's second level, 4-15 its third, 16-63 its fourth (base 4)


def check_priority(priority: str) -> str:
    """`priority` if it names a class of `PRIORITIES`, else ValueError in one line (bounded at the edge)."""
    if priority not in PRIORITIES:
        raise ValueError(f"priority {priority!r}: must be one of {', '.join(PRIORITIES)}")
    return priority


def settings_refused(exc: ValidationError, prefix: str) -> str:
    """What a settings class (the client's, the worker's) refused, on one line: each environment variable
    and why, never its value (pydantic's own report is many lines and echoes it)."""
    bad = "; ".join(f"{prefix}{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
    return f"an environment setting is refused: {bad}"


def message_priority(priority: str | None, chunk: int) -> int:
    """The broker priority (0 first) of chunk `chunk` of a job of class `priority` (None or unknown: the
    default class): the class's first value for chunk 0, one more per 4x the chunks sent, up to its last."""
    first, last = PRIORITIES.get(priority or DEFAULT_PRIORITY, PRIORITIES[DEFAULT_PRIORITY])
    level, reach = 0, 1
    while chunk >= reach and first + level < last:
        level, reach = level + 1, reach * LEVEL_GROWTH
    return first + level


MAX_TASK_CHARS = 8 << 20  # puzzle text of one task message (the producer sends at most 1 MB by default)
MAX_CHUNK_PUZZLES = 1 << 17  # puzzles of one task message (each costs ~1 KB while solved)
MAX_RUNS = MAX_CHUNK_PUZZLES  # (first, count) runs of one task message
MAX_NAME_CHARS = 4096  # input name, portfolio and box texts
MAX_TIME_LIMIT_S = 86400.0  # the longest time limit per puzzle a task may ask for
DEFAULT_TIME_LIMIT_S = 20.0  # per puzzle when a job names none (`solve`, `submit`, `BatchClient`); 0: none
DEFAULT_ESCALATE_AFTER_S = 2.0  # a puzzle unanswered this long is escalated to idle processes
MAX_ESCALATE_AFTER_S = MAX_TIME_LIMIT_S
MAX_SPLIT_BYTES = 64 << 20  # a split a worker reads, in bytes (the client plans 8 MB, at most half this)
MAX_SPLIT_ENTRIES = 4 * MAX_CHUNK_PUZZLES  # puzzle lines a worker takes from one split (shorter: refused)
MAX_FILE_BYTES = 1 << 62
MAX_SEED = 2**63 - 1  # seeds are 63-bit: any one fits a JSON number and numpy's SeedSequence
MAX_STAMP_CHARS = 256  # an input's stamp: a modification time, an ETag or a version id
MAX_COLUMNS = 1 << 10  # fields of a CSV input's line: its puzzle column lies among the first


class InputRange(BaseModel):
    """Bytes `[start, end)` of an input the workers read themselves (`pipeline.engine.splits`): the split
    owns every line whose first byte falls in that range, so consecutive splits hold each line once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1, max_length=MAX_NAME_CHARS)  # a path or a URL (`pipeline.engine.storage`)
    input: int = Field(default=0, ge=0, lt=1 << 20)  # the input's position among the job's (lines from 1)
    start: int = Field(ge=0, lt=MAX_FILE_BYTES)
    end: int = Field(ge=0, lt=MAX_FILE_BYTES)
    size: int = Field(ge=0, lt=MAX_FILE_BYTES)  # the file's size when submitted: another is refused
    # and its stamp (`pipeline.engine.storage.Stat`: mtime, ETag or version id): another is refused; None
    # (older clients): the size alone is checked
    stamp: str | None = Field(default=None, max_length=MAX_STAMP_CHARS)
    column: int | None = Field(default=None, ge=0, lt=MAX_COLUMNS)  # a CSV input's puzzle field, from 0

    @model_validator(mode="after")
    def _bounded(self) -> InputRange:
        if not self.start <= self.end <= self.size:
            raise ValueError("a split must lie within its file: start <= end <= size")
        if self.end - self.start > MAX_SPLIT_BYTES:
            raise ValueError(f"a split of {self.end - self.start} bytes; at most {MAX_SPLIT_BYTES} are read")
        return self


class Dataset(BaseModel):
    """Where the process that solves a chunk writes its parts as files (`pipeline.engine.dataset`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1, max_length=MAX_NAME_CHARS)  # the dataset's directory: a path or a URL
    format: OutputFormat = "jsonl"
    compression: Compression = "none"


class ChunkTask(BaseModel):
    """A solve task: the puzzles of a chunk (joined by newlines) and how to solve them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    NAME: ClassVar[str] = SOLVE_TASK_NAME  # the worker's task that runs it

    v: int = VERSION  # the client's protocol version: a worker of another refuses the task in one log line
    job: str = Field(pattern=JOB_ID_PATTERN)
    chunk: int = Field(ge=0, lt=2**53)
    input: str = Field(max_length=MAX_NAME_CHARS)
    index_runs: Runs = Field(max_length=MAX_RUNS)  # (first, count): positions among the job's puzzles
    line_runs: Runs = Field(max_length=MAX_RUNS)  # (first, count): 1-based lines where the puzzles start
    puzzles: str = Field(max_length=MAX_TASK_CHARS)  # the puzzle texts joined by "\n"
    spans: list[int] | None = Field(default=None, max_length=MAX_CHUNK_PUZZLES)  # rows per multi-row puzzle
    box: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    time_limit: float | None = Field(default=None, gt=0, le=MAX_TIME_LIMIT_S)
    portfolio: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    # seconds before a puzzle still unanswered is escalated to idle processes (`pipeline.escalation.task`);
    # None (older clients) or 0: never
    escalate_after: float | None = Field(default=None, ge=0, le=MAX_ESCALATE_AFTER_S)
    # what the solving process renders the records in (`columns`: the result columns, rendered by the reader)
    format: Format = "columns"
    # the puzzles are lines of an input the worker reads itself (index and line runs, text: empty until read)
    split: InputRange | None = None
    # the parts go to files there (the part published to the job holds their header and statistics only)
    dataset: Dataset | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ChunkTask:
        """Refuse a message whose runs, spans and text disagree (a hand-made one could ask for huge lists)."""
        if self.split is not None:
            if self.index_runs or self.line_runs or self.puzzles or self.spans is not None:
                raise ValueError("a split task carries no puzzles: its worker reads them")
            return self
        counts = [n for _, n in self.index_runs]
        if any(n < 1 for n in counts) or any(n < 1 for _, n in self.line_runs):
            raise ValueError("runs must have positive counts")
        if any(first < 0 for first, _ in self.index_runs) or any(first < 1 for first, _ in self.line_runs):
            raise ValueError("runs must start at index 0 or line 1 or later")
        n = sum(counts)
        if n > MAX_CHUNK_PUZZLES:
            raise ValueError(f"{n} puzzles in one chunk; at most {MAX_CHUNK_PUZZLES} are accepted")
        if sum(c for _, c in self.line_runs) != n:
            raise ValueError("index_runs and line_runs count different numbers of puzzles")
        rows = self.puzzles.count("\n") + 1 if n else 0
        if self.spans is None:
            if rows != n:
                raise ValueError(f"the text has {rows} lines for {n} puzzles")
        elif len(self.spans) != n or any(s < 1 for s in self.spans) or sum(self.spans) != rows:
            raise ValueError("spans do not match the puzzles' text")
        return self

    def __len__(self) -> int:
        return sum(n for _, n in self.index_runs)

    def texts(self) -> list[str]:
        """Return the puzzle texts, regrouping multi-row puzzles by `spans`."""
        return split_texts(self.puzzles, self.spans, len(self))


class ChunkRef(BaseModel):
    """A solve message that names its chunk instead of carrying it: the worker reads the task from the outbox
    (every task is committed there before it is sent), so a message is a few bytes, not a copy of ~1 MB."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: int = 1  # absent in the messages of clients before VERSION 3: those are refused
    job: str = Field(pattern=JOB_ID_PATTERN)
    chunk: int = Field(ge=0, lt=2**53)
    ref: Literal["outbox"] = "outbox"


def version_refusal(what: str, v: int, me: str) -> str | None:
    """The one line refusing `what` (a task's client, a part's worker) of protocol version `v`, naming both
    versions; None when `v` is this one. `me` names this side (`worker`, `client`)."""
    if v == VERSION:
        return None
    return (
        f"{what} speaks pipeline version {v}, this {me} version {VERSION}: "
        "run one version of sudoku-batch on the clients and the workers"
    )


def solver_seed(job: str, chunk: int) -> int:
    """Derive a solve chunk's solver seed from the job id and chunk index (stable across machines)."""
    digest = hashlib.blake2b(f"{job}:{chunk}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") & (2**62 - 1)) | 1
