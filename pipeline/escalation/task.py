"""One puzzle across the fleet: the helper's task and post, what a race trades on its board, and the puzzle's
one record, written by its owner alone (`fold_helpers`; docs/pipeline.md, Escalation)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, StrictInt, TypeAdapter, ValidationError, create_model
from pydantic import Field as PydanticField

from pipeline.contract.tasks import (
    HELPER_TASK_NAME,
    JOB_ID_PATTERN,
    MAX_CHUNK_PUZZLES,
    MAX_NAME_CHARS,
    MAX_SEED,
    MAX_TIME_LIMIT_S,
)
from solvers.fields import FIELDS, Field
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import PuzzleError
from solvers.model.result import SolveResult
from solvers.model.status import Status
from solvers.race.cubes import MAX_CLAUSE_TERMS, MAX_CUBES, Clause, Cube, Cubes, valid_clause, valid_cube

if TYPE_CHECKING:
    from solvers.race.exchange import Exchange

log = logging.getLogger(__name__)
MAX_HELPERS = 64  # helpers called for one puzzle (a fleet of more idle processes lends it no more)
MAX_SHARED_BATCHES = 4096  # batches of clauses one escalation's board holds (more are not shared)
MAX_BATCH_CLAUSES = 256  # clauses in one shared batch
ANYONE = 0  # the sender of clauses every search imports, its own included (cube refutations, lookahead units)
CUBES_SOLVER = "split"  # the record's solver when every cube was refuted (`fold_helpers`)
MAX_PUZZLE_CHARS = 1 << 16  # one puzzle's text in a helper's message (64x64 in grid notation: ~25 KB)
MAX_COUNTER_MEMBERS = 64  # members in one helper's counters
MAX_CLAUSES_BYTES = 1 << 16  # one batch of shared clauses, or the escalation's cubes, as JSON
ROUND_TERMS = 512  # terms of learnt clauses one process shares a round (a poll: 0.25 s), shortest first
MAX_SEEN = 1 << 20  # clauses one process remembers as shared or imported (duplicates filtered), per puzzle


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
    seed: int = PydanticField(default=0, ge=0, le=MAX_SEED)
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
    whether the helpers proved it has no solution."""

    entries: dict[int, HelperEntry]
    winner: int | None = None
    unsolvable: bool = False
    cubes_refuted: bool = False  # every cube of the escalation's split refuted


_TERM_LISTS = TypeAdapter(list[list[StrictInt]])


class SharedBatch(BaseModel):
    """One batch of clauses on an escalation's board: its job, its sender (`ANYONE`, the owner -1, helper k)
    and at most MAX_BATCH_CLAUSES clauses of 1..MAX_CLAUSE_TERMS terms (their range: `read_batch`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str = PydanticField(pattern=JOB_ID_PATTERN)
    sender: int = PydanticField(ge=-1, le=MAX_HELPERS)
    clauses: list[list[StrictInt]] = PydanticField(max_length=MAX_BATCH_CLAUSES)


def read_batch(raw: str | bytes, job: str, side: int) -> tuple[SharedBatch | None, str | None]:
    """A stored batch of this escalation's clauses, or None and why it is none: too long, malformed, another
    job's, an empty or too long clause, a term outside a grid of side `side` (0: unchecked)."""
    if len(raw) > MAX_CLAUSES_BYTES:
        return None, f"{len(raw)} bytes (at most {MAX_CLAUSES_BYTES})"
    try:
        batch = SharedBatch.model_validate_json(raw)
    except ValidationError as exc:
        return None, f"malformed: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"[:200]
    if batch.job != job:
        return None, f"it names job {batch.job[:40]!r}"
    top = side**3 if side else 2**62
    for clause in batch.clauses:
        if not 0 < len(clause) <= MAX_CLAUSE_TERMS:
            return None, f"a clause of {len(clause)} terms (1..{MAX_CLAUSE_TERMS})"
        if not all(0 < abs(t) <= top for t in clause):
            return None, f"a term outside 1..{top} or its negation"
    return batch, None


def batch_texts(job: str, clauses: list[Clause], sender: int) -> Iterator[str]:
    """Clauses from `sender` as the board stores them: batches of at most MAX_BATCH_CLAUSES, as JSON."""
    for start in range(0, len(clauses), MAX_BATCH_CLAUSES):
        part = [list(c) for c in clauses[start : start + MAX_BATCH_CLAUSES]]
        yield SharedBatch(job=job, sender=sender, clauses=part).model_dump_json()


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
    """The puzzle's one result: the owner's answer when it solved or refuted it, else the winner's verified
    grid, else `unsolvable` when the helpers proved it; `counters` gain every helper's members either way."""
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


class ClauseRounds:
    """One process's trade of clauses on the board for one puzzle, a round per poll: what its searches learnt
    out (shortest first, at most ROUND_TERMS terms), what the others shared since in (no duplicates)."""

    def __init__(self, board: Any, chunk: int, row: int, me: int, learnt: bool = True) -> None:  # a `Board`
        self.board, self.chunk, self.row, self.me = board, chunk, row, me
        self.learnt = learnt  # False: import the refutations and units only, no search's learnt clauses
        self.cursor = 0
        self.seen: set[Clause] = set()
        self.full = False  # the board holds MAX_SHARED_BATCHES: no more learnt clauses shared

    def round(self, exchange: Exchange, side: int) -> None:
        """Share this round's learnt clauses, then import the others'."""
        out, terms = [], 0
        for clause in sorted(exchange.take(), key=len):
            if tuple(sorted(clause)) in self.seen or not valid_clause(clause, side):
                continue
            if terms + len(clause) > ROUND_TERMS:
                break
            self._new(clause)
            out.append(clause)
            terms += len(clause)
        if out and not self.full:
            self.full = not self.board.push(self.chunk, self.row, out, self.me)
        clauses, self.cursor = self.board.shared(
            self.chunk, self.row, self.cursor, self.me, side, self.learnt
        )
        exchange.offer([c for c in clauses if self._new(c) and valid_clause(c, side)])

    def _new(self, clause: Clause) -> bool:
        """Remember `clause`; False when it was seen already."""
        key = tuple(sorted(clause))
        if key in self.seen:
            return False
        if len(self.seen) >= MAX_SEEN:  # a puzzle raced for hours: forget, at worst a duplicate goes again
            self.seen.clear()
        self.seen.add(key)
        return True


class BoardCubes:
    """A helper's `CubeSource`: the escalation's cubes on its board; a board that fails is logged and read as
    "no cube" (the helper searches the whole puzzle)."""

    def __init__(self, board: Any, task: HelperTask, side: int) -> None:  # a `Board`
        self.board, self.task, self.side = board, task, side
        self.count = 0

    def _safely(self, what: str, call: Callable[..., object], *args: object) -> object:
        """`call(chunk, row, *args)` on the board; None when the board fails (logged)."""
        try:
            return call(self.task.chunk, self.task.row, *args)
        except Exception as exc:  # noqa: BLE001 - the search goes on without the board
            log.warning("escalation of chunk %s row %s: %s: %s", self.task.chunk, self.task.row, what, exc)
            return None

    def _checked(self, cubes: object) -> list[Cube] | None:
        if not isinstance(cubes, list) or not all(valid_cube(c, self.side) for c in cubes):
            return None
        self.count = len(cubes)
        return cubes

    def published(self) -> list[Cube] | None:
        return self._checked(self._safely("reading the cubes", self.board.cubes))

    def publish(self, split: Cubes) -> list[Cube]:
        cubes, units = list(split.cubes), list(split.units)
        return self._checked(self._safely("publishing cubes", self.board.publish_cubes, cubes, units)) or []

    def take(self) -> int | None:
        if not self.count:
            return None
        taken = self._safely("taking a cube", self.board.take_cube, self.task.helper, self.count)
        return taken if isinstance(taken, int) else None

    def refute(self, index: int, clause: Clause) -> None:
        self._safely("handing back a refuted cube", self.board.refute_cube, index, clause)


def side_of(text: str, box: str | None) -> int:
    """The side of an escalated puzzle's grid (0: unreadable: no cubes, and the search answers `invalid`)."""
    try:
        return parse_puzzle(text, box).box.n
    except (PuzzleError, ValueError):
        return 0
