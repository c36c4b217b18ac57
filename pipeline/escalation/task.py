"""One puzzle across the fleet: the third task kind (`HelperTask`), what a helper posts (`HelperEntry`), and
how
the chunk's owner folds the helpers' work into the puzzle's one record (`fold_helpers`).

A solve chunk with `escalate_after` S set (`ChunkTask.escalate_after`) has its owner (the
worker, or local process, solving the chunk) call helpers for any puzzle its search has not
answered after S seconds: idle processes search the same puzzle with another seed and variant
(`helper_seed`), each posting `started`, then its answer and counters. The owner alone writes
the record: it takes a helper's grid only once the independent verifier accepts it, and the
record's `counters` hold every member of every helper (`sat@helper1`, ...), so they add up
the work of every process. Owner and helpers meet through a `Board` (`pipeline.escalation.board`):
Redis keys for workers (`pipeline.contract.keys.EscalationKeys`), shared memory for local processes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, StrictInt, TypeAdapter, ValidationError, create_model
from pydantic import Field as PydanticField

from pipeline.contract.tasks import (
    HELPER_TASK_NAME,
    JOB_ID_PATTERN,
    MAX_CHUNK_PUZZLES,
    MAX_NAME_CHARS,
    MAX_TIME_LIMIT_S,
)
from solvers.fields import FIELDS, Field
from solvers.model.result import SolveResult, Status
from solvers.race.cubes import MAX_CLAUSE_TERMS, MAX_CUBES, Clause

MAX_HELPERS = 64  # helpers called for one puzzle (a fleet of more idle processes lends it no more)
MAX_SHARED_BATCHES = 4096  # batches of clauses one escalation's board holds (more are not shared)
MAX_BATCH_CLAUSES = 256  # clauses in one shared batch
ANYONE = 0  # the sender of clauses every search imports, its own included (cube refutations, lookahead units)
CUBES_SOLVER = "split"  # the record's solver when every cube was refuted (`fold_helpers`)
MAX_PUZZLE_CHARS = 1 << 16  # one puzzle's text in a helper's message (64x64 in grid notation: ~25 KB)
MAX_COUNTER_MEMBERS = 64  # members in one helper's counters


class HelperTask(BaseModel):
    """A helper's task: search one puzzle of a chunk (row `row`) that its owner has not answered in time."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    NAME: ClassVar[str] = HELPER_TASK_NAME

    job: str = PydanticField(pattern=JOB_ID_PATTERN)
    chunk: int = PydanticField(ge=0, lt=2**53)
    row: int = PydanticField(ge=0, lt=MAX_CHUNK_PUZZLES)  # the puzzle's position in its chunk
    helper: int = PydanticField(ge=1, le=MAX_HELPERS)  # 1, 2, ...: names its counters and its variant
    puzzle: str = PydanticField(min_length=1, max_length=MAX_PUZZLE_CHARS)
    box: str | None = PydanticField(default=None, max_length=MAX_NAME_CHARS)
    time_limit: float | None = PydanticField(default=None, gt=0, le=MAX_TIME_LIMIT_S)
    portfolio: str | None = PydanticField(default=None, max_length=MAX_NAME_CHARS)
    seed: int = PydanticField(default=0, ge=0, lt=2**63)
    cubes: int = PydanticField(default=0, ge=0, le=MAX_CUBES)  # > 0: search cubes, a split into >= this many


class _Entry(BaseModel):
    """What a helper posts: `started` when it begins, `done` with its answer and counters when it ends;
    its answer's fields are those the field table marks `posted` (`solvers.fields`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state: Literal["started", "done"]

    @classmethod
    def of(cls, result: SolveResult) -> Any:
        """A helper's final entry from its result (a grid only when solved: the rest is not an answer)."""
        values = {f.name: getattr(result, f.result) for f in POSTED}  # type: ignore[arg-type]
        if result.status != Status.SOLVED:
            values["solution"] = None
        return cls(state="done", **values)


def _entry_field(f: Field) -> tuple[Any, Any]:
    """A posted field's type and bounds in a helper's entry (every number and text bounded)."""
    if f.kind == "status":
        return Status | None, None
    if f.kind == "text":
        return str | None, PydanticField(default=None, max_length=MAX_PUZZLE_CHARS)
    if f.kind == "name":
        return str | None, PydanticField(default=None, max_length=MAX_NAME_CHARS)
    if f.kind == "int":
        return int, PydanticField(default=0, ge=0, lt=2**63)
    if f.kind == "counters":
        return dict[str, dict[str, Any]], PydanticField(default_factory=dict, max_length=MAX_COUNTER_MEMBERS)
    raise ValueError(f"field {f.name}: a helper cannot post a {f.kind} value")


POSTED = [f for f in FIELDS if f.posted]
HelperEntry = create_model(
    "HelperEntry", __base__=_Entry, __module__=__name__, **{f.name: _entry_field(f) for f in POSTED}
)


@dataclasses.dataclass(frozen=True)
class EscalationEnd:
    """The end of one escalated puzzle: every helper's last entry, the helper whose grid won (if any), and
    whether the helpers proved it has no solution (`cubes_refuted`: every cube refuted; else a helper's
    own proof)."""

    entries: dict[int, HelperEntry]
    winner: int | None = None
    unsolvable: bool = False
    cubes_refuted: bool = False  # every cube of the escalation's split refuted


_TERM_LISTS = TypeAdapter(list[list[StrictInt]])


class SharedBatch(BaseModel):
    """One batch of clauses on an escalation's board: its job, its sender (`ANYONE`, the owner -1, helper k)
    and at most MAX_BATCH_CLAUSES clauses of 1..MAX_CLAUSE_TERMS terms (their range: `batch_error`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str = PydanticField(pattern=JOB_ID_PATTERN)
    sender: int = PydanticField(ge=-1, le=MAX_HELPERS)
    clauses: list[list[StrictInt]] = PydanticField(max_length=MAX_BATCH_CLAUSES)


def batch_error(batch: SharedBatch, job: str, side: int) -> str | None:
    """Why a well-formed batch is no batch of clauses of this escalation (None: it is): another job's,
    an empty or too long clause, a term outside a grid of side `side` (0: unchecked)."""
    if batch.job != job:
        return f"it names job {batch.job[:40]!r}"
    top = side**3 if side else 2**62
    for clause in batch.clauses:
        if not 0 < len(clause) <= MAX_CLAUSE_TERMS:
            return f"a clause of {len(clause)} terms (1..{MAX_CLAUSE_TERMS})"
        if not all(0 < abs(t) <= top for t in clause):
            return f"a term outside 1..{top} or its negation"
    return None


def read_clauses(raw: str | bytes, limit: int, width: int = MAX_CLAUSE_TERMS) -> list[Clause] | None:
    """Clauses (or cubes) from a board's JSON: a list of at most `limit` lists of 1..`width` int terms
    (their range is checked by the search that imports them); None when malformed."""
    try:
        lists = _TERM_LISTS.validate_json(raw)
    except ValidationError:
        return None
    if len(lists) > limit or any(not 0 < len(c) <= width for c in lists):
        return None
    return [tuple(c) for c in lists]


def helper_name(member: str, helper: int) -> str:
    """A helper's member as the record names it (`sat@helper2`)."""
    return f"{member}@helper{helper}"


def helper_seed(job: str, chunk: int, row: int, helper: int) -> int:
    """The seed of helper `helper` racing row `row` of a chunk (a stable hash: the same on every machine)."""
    digest = hashlib.blake2b(f"{job}:{chunk}:{row}:{helper}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") & (2**62 - 1)) | 1


def fold_helpers(owner: SolveResult, end: EscalationEnd) -> SolveResult:
    """The puzzle's one result: the owner's own answer when it solved or refuted it, else the winning
    helper's verified grid, else `unsolvable` when the helpers proved it (`solver` names the helper
    whose search proved it, or `split` when every cube of the split was refuted); `counters` gain
    every helper's members either way."""
    counters = dict(owner.counters)
    for helper, entry in sorted(end.entries.items()):
        for member, values in entry.counters.items():
            counters[helper_name(member, helper)] = values
    own = owner.status in (Status.SOLVED, Status.UNSOLVABLE, Status.INVALID)
    if not own and end.winner is None and end.unsolvable:  # a helper's proof, or every cube refuted
        proofs = [(k, e) for k, e in sorted(end.entries.items()) if e.status == Status.UNSOLVABLE]
        solver = (
            helper_name(proofs[0][1].solver or "?", proofs[0][0])
            if proofs and not end.cubes_refuted
            else CUBES_SOLVER
        )
        return SolveResult(
            Status.UNSOLVABLE, puzzle=owner.puzzle, solver=solver, elapsed=owner.elapsed, counters=counters
        )
    if own or end.winner is None:
        return dataclasses.replace(owner, counters=counters)
    entry = end.entries[end.winner]
    return SolveResult(
        Status.SOLVED,
        puzzle=owner.puzzle,
        solution=entry.solution,
        cost=0,
        solver=helper_name(entry.solver or "?", end.winner),
        elapsed=owner.elapsed,
        nodes=entry.nodes,
        guesses=entry.guesses,
        restarts=entry.restarts,
        counters=counters,
    )
