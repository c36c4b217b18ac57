"""Generate one chunk: the task message, the function both transports run, and its result.

The second kind of chunk task: make `count` puzzles of a box from a chunk seed, sent like a solve task; the
collector hands the `GenerateResult`s back in plan order, so the files depend on the seed, the options and
the chunk size only. Every number is bounded (puzzles and cells as a solve chunk's, candidates `count x
attempts`); a result is stored as one JSON object `{"n", "puzzles", "solutions", "meta", "error", "cpu_s"}`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from pipeline.contract.part import PartStats
from pipeline.contract.tasks import (
    GENERATE_TASK_NAME,
    JOB_ID_PATTERN,
    MAX_CHUNK_PUZZLES,
    MAX_SEED,
    MAX_TASK_CHARS,
)
from solvers.generate.difficulty import LEVEL_NAMES, RATE_BUDGET
from solvers.generate.generator import DIG_BUDGET, MINIMAL_BUDGET, Options
from solvers.model.puzzle import MAX_SIDE, Box

MAX_ATTEMPTS = 10_000  # candidates per requested puzzle
MAX_CANDIDATES = 1 << 20  # count x attempts of one chunk: every candidate may be held until the end
BUDGET_FACTOR = 10  # search budgets may be raised this far above their defaults


class GenerateOptions(BaseModel):
    """`solvers.generate.generator.Options` as a message carries it (`Options.to_dict`), bounded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unique: bool = False
    clues: int | None = Field(default=None, ge=0, le=MAX_SIDE**2)
    holes: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)  # fraction blanked
    minimal: bool = False
    symmetry: Literal["none", "rotational", "mirror"] = "none"
    difficulty: list[str] | None = Field(default=None, max_length=len(LEVEL_NAMES))
    attempts: int = Field(default=100, ge=1, le=MAX_ATTEMPTS)
    dig_budget: int = Field(default=DIG_BUDGET, ge=1, le=BUDGET_FACTOR * DIG_BUDGET)
    minimal_budget: int = Field(default=MINIMAL_BUDGET, ge=1, le=BUDGET_FACTOR * MINIMAL_BUDGET)
    rate_budget: int = Field(default=RATE_BUDGET, ge=1, le=BUDGET_FACTOR * RATE_BUDGET)

    @field_validator("difficulty")
    @classmethod
    def _known_levels(cls, levels: list[str] | None) -> list[str] | None:
        """Refuse a level the rater does not know (a typo would filter everything out)."""
        for level in levels or []:
            if level not in LEVEL_NAMES:
                raise ValueError(f"difficulty {level[:20]!r}: choose from {', '.join(LEVEL_NAMES)}")
        return levels

    @model_serializer(mode="wrap")
    def _holes_only_when_asked(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave `holes` out of the message unless asked, so workers that predate it take the rest."""
        out = handler(self)
        if out.get("holes") is None:
            out.pop("holes", None)
        return out

    def options(self) -> Options:
        """The generator's options (ValueError for combinations it refuses)."""
        return Options(**self.model_dump())


class GenerateTask(BaseModel):
    """One generate message: make `count` puzzles of `box` from `seed` with `options`, as chunk `chunk`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    NAME: ClassVar[str] = GENERATE_TASK_NAME  # the worker's task that runs it

    job: str = Field(pattern=JOB_ID_PATTERN)
    chunk: int = Field(ge=0, lt=2**53)
    box: str = Field(max_length=16)
    count: int = Field(ge=1, le=MAX_CHUNK_PUZZLES)
    seed: int = Field(ge=0, le=MAX_SEED)
    options: GenerateOptions = GenerateOptions()

    @model_validator(mode="after")
    def _bounded(self) -> GenerateTask:
        """Refuse a box that is no box, and chunks whose cells or candidates exceed the bounds."""
        box = self.shape()
        if self.count * box.cells > MAX_TASK_CHARS:
            raise ValueError(
                f"{self.count} puzzles of {box.cells} cells: at most {MAX_TASK_CHARS:,} cells a chunk"
            )
        if self.count * self.options.attempts > MAX_CANDIDATES:
            candidates = self.count * self.options.attempts
            raise ValueError(f"{candidates:,} candidates (count x attempts): at most {MAX_CANDIDATES:,}")
        return self

    def __len__(self) -> int:
        return self.count

    def shape(self) -> Box:
        """The box shape (ValueError for a text that is not one)."""
        return Box.parse(self.box)


def max_chunk_size(box: Box, attempts: int) -> int:
    """The most puzzles one generate chunk of `box` with `attempts` may ask for (what workers accept)."""
    return max(1, min(MAX_CHUNK_PUZZLES, MAX_TASK_CHARS // box.cells, MAX_CANDIDATES // attempts))


class GenerateHeader(BaseModel):
    """Which chunk a generate result answers, and its statistics (puzzles made, CPU)."""

    job: str
    chunk: int
    stats: PartStats


@dataclass(slots=True, eq=False)
class GenerateResult:
    """A generate chunk's lines (puzzles, solutions, meta: aligned), or the error that stopped it."""

    header: GenerateHeader
    puzzles: list[str]
    solutions: list[str]
    meta: list[str]
    error: str | None = None

    def __len__(self) -> int:
        return len(self.puzzles)

    @classmethod
    def failed(cls, job: str, chunk: int, reason: str, cpu_s: float = 0.0) -> GenerateResult:
        """The answer of a chunk that could not be made: its error, no lines."""
        return cls(GenerateHeader(job=job, chunk=chunk, stats=_stats(0, cpu_s)), [], [], [], reason[:500])

    def encode(self) -> bytes:
        """The stored form: one JSON object with the line lists."""
        lists = {"puzzles": self.puzzles, "solutions": self.solutions, "meta": self.meta}
        body = {"n": len(self.puzzles), **lists, "error": self.error, "cpu_s": self.header.stats.cpu_s}
        return json.dumps(body).encode()

    @classmethod
    def decode(cls, payload: bytes | bytearray, job: str, chunk: int) -> GenerateResult:
        """Invert `encode` (the store key names the chunk); ValueError for a body that is not one."""
        body = json.loads(payload)
        if not isinstance(body, dict):
            raise ValueError(f"chunk {chunk}: not a generate result")
        lists = [body.get(k) or [] for k in ("puzzles", "solutions", "meta")]
        if not all(isinstance(x, list) and all(isinstance(t, str) for t in x) for x in lists):
            raise ValueError(f"chunk {chunk}: a generate result without line lists")
        error = body.get("error")
        stats = _stats(len(lists[0]), float(body.get("cpu_s") or 0.0))
        header = GenerateHeader(job=job, chunk=chunk, stats=stats)
        return cls(header, *lists, error=None if error is None else str(error))


def _stats(n: int, cpu_s: float) -> PartStats:
    """A generate chunk's statistics: what the store and `status` read of any chunk."""
    from pipeline.engine.solve import worker_name

    return PartStats(n=n, cpu_s=cpu_s, end=time.time(), worker=worker_name())


def generate_result(task: GenerateTask) -> GenerateResult:
    """Make the chunk's puzzles and render their lines; options the generator refuses are its error."""
    from solvers.generate.generator import generate_chunk, render_lines

    start = time.process_time()
    try:
        box = task.shape()
        items = generate_chunk(box, task.count, task.seed, task.options.options())
    except ValueError as exc:
        reason = f"bad generate request: {type(exc).__name__}: {exc}"
        return GenerateResult.failed(task.job, task.chunk, reason, time.process_time() - start)
    puzzles, solutions, meta = render_lines(items, box)
    header = GenerateHeader(job=task.job, chunk=task.chunk, stats=_stats(len(items), 0.0))
    header.stats.cpu_s = time.process_time() - start
    return GenerateResult(header, puzzles, solutions, meta)


def warm(box: Box) -> None:
    """Load the generator's compiled kernels here, so forked processes start warm (~0.2 CPU s each saved):
    a 2x2 run loads them all (typed, not sized), a 4x4 one the fill path of sides above 12."""
    from solvers.generate.generator import generate_chunk

    generate_chunk(Box(2, 2), 1, 0, Options(unique=True))
    if box.n > 12:
        generate_chunk(Box(4, 4), 1, 0, Options(unique=True))
