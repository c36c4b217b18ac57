"""The owner's side of one puzzle raced across processes: `Escalation` calls helpers, watches their answers
and stops them; a `Board` is where owner and helpers meet (Redis for workers, shared memory embedded).

A chunk's owner solves with `Escalation.racing` as `solve_many`'s `racing` hook: around the
search of each puzzle the batch's first pass left unsolved. A thread (started at the first such
puzzle: an easy chunk never has one) asks every `poll_s`:
once the puzzle has been searched `escalate_after` seconds and a process is idle, it opens
the puzzle's race (a lease the owner refreshes: helpers stop when it lapses, so a dead
owner leaves no helper running), calls as many helpers as there are idle processes
(counting those called and not yet started), and takes the first helper's grid the
independent verifier accepts: the race is closed and the owner's own search stopped
through its flag. With no idle process, nothing is written anywhere. When the owner's search ends (its
answer, a helper's, or the time limit), the race is closed (helpers stop at their next
slice) and the owner waits up to `grace_s` for the started helpers' last counters.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

import numpy as np

from pipeline.contract.tasks import ChunkTask
from pipeline.engine.stop import StopPoller
from pipeline.escalation.task import (
    MAX_BATCH_CLAUSES,
    MAX_HELPERS,
    EscalationEnd,
    HelperEntry,
    HelperTask,
    helper_seed,
    read_clauses,
)
from solvers.kernel.stop import new_flag, raise_flag
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import PuzzleError
from solvers.model.result import SolveResult, Status
from solvers.model.verify import is_solution
from solvers.race.cubes import MAX_CUBE_CELLS, MAX_CUBES, Clause, Cube, Cubes, valid_clause, valid_cube
from solvers.race.exchange import Exchange, Raced
from solvers.shares import helper_splits

log = logging.getLogger(__name__)
GRACE_S = 1.5  # how long a closed race waits for its started helpers' last counters
SETTLE_POLL_S = 0.05
MAX_CLAUSES_BYTES = 1 << 16  # one batch of shared clauses, or the race's cubes, as JSON


class Board(Protocol):
    """Where the owner of a chunk and the helpers racing its puzzles meet (one job). Each form (Redis for
    workers, a manager's dict for local processes) writes the race's life (`open` to `call`) and the split
    search's few primitives (`_create` to `_batches`); the split search itself is written here once."""

    def open(self, chunk: int, row: int) -> None:
        """Owner: the puzzle is raced (set or refresh its lease)."""

    def over(self, chunk: int, row: int) -> bool:
        """Helper: True once the puzzle needs no more search (closed, lease lapsed, job stopped)."""

    def close(self, chunk: int, row: int) -> None:
        """Anyone: end the race (helpers stop at their next poll)."""

    def post(self, chunk: int, row: int, helper: int, entry: HelperEntry) -> None:
        """Helper: publish its state (`started`, then `done` with answer and counters)."""

    def entries(self, chunk: int, row: int) -> dict[int, HelperEntry]:
        """Every helper's last entry (malformed ones left out)."""

    def drop(self, chunk: int, row: int) -> None:
        """Owner: forget the race (its entries are merged)."""

    def idle(self) -> int:
        """Processes that could take a helper task now."""

    def call(self, task: HelperTask) -> None:
        """Send one helper task."""

    def _create(self, chunk: int, row: int, cubes: str) -> bool | None:
        """Store the cubes' JSON unless the race has some: True when these were stored (None: job gone)."""

    def _stored(self, chunk: int, row: int) -> str | bytes | None:
        """The race's cubes' JSON as stored."""

    def _claim(self, chunk: int, row: int, helper: int, index: int, renew: bool) -> bool:
        """Hold cube `index` for `helper` (a lease) unless it is held; `renew`: refresh the holder's lease."""

    def _mark(self, chunk: int, row: int, index: int, clause: str) -> bool:
        """Note cube `index` refuted (`clause`: why, as JSON), free its hold; False when the job is gone."""

    def _marked(self, chunk: int, row: int) -> list[Any]:
        """The refuted cubes' numbers as stored (texts)."""

    def _append(self, chunk: int, row: int, batch: str) -> bool:
        """Append a batch of shared clauses (JSON); False when the race holds MAX_SHARED_BATCHES already."""

    def _batches(self, chunk: int, row: int, since: int) -> list[Any]:
        """The shared batches from position `since` on, as stored."""

    def publish_cubes(
        self, chunk: int, row: int, cubes: list[Cube], units: list[Clause]
    ) -> list[Cube] | None:
        """Helper: offer a split (and the unit clauses found making it); return the race's cubes, the
        first split offered (None: unreadable)."""
        created = self._create(chunk, row, json.dumps([list(c) for c in cubes]))
        if created and units:
            self._push(chunk, row, units)
        return None if created is None else self.cubes(chunk, row)

    def cubes(self, chunk: int, row: int) -> list[Cube] | None:
        """The race's cubes (None: not split yet, or unreadable)."""
        raw = self._stored(chunk, row)
        if raw is None or len(raw) > MAX_CLAUSES_BYTES:
            return None
        return read_clauses(raw, MAX_CUBES, MAX_CUBE_CELLS)

    def take_cube(self, chunk: int, row: int, helper: int, count: int) -> int | None:
        """Helper: claim the first of `count` cubes neither refuted nor held (a lease `hold_cube` keeps)."""
        refuted = self.refuted(chunk, row)
        free = (index for index in range(min(count, MAX_CUBES)) if index not in refuted)
        return next((index for index in free if self._claim(chunk, row, helper, index, False)), None)

    def hold_cube(self, chunk: int, row: int, helper: int, index: int) -> None:
        """Helper: keep its claim on cube `index` alive."""
        self._claim(chunk, row, helper, index, True)

    def refute_cube(self, chunk: int, row: int, index: int, clause: Clause) -> None:
        """Helper: cube `index` has no solution; `clause` (why) is shared with every search."""
        if self._mark(chunk, row, index, json.dumps(list(clause))):
            self._push(chunk, row, [clause])

    def refuted(self, chunk: int, row: int) -> set[int]:
        """The cubes refuted so far."""
        return {int(index) for index in self._marked(chunk, row) if index.isdigit()}

    def shared(self, chunk: int, row: int, since: int) -> tuple[list[Clause], int]:
        """The clauses shared from position `since` on, and the position after them."""
        raws = self._batches(chunk, row, since)
        out: list[Clause] = []
        for raw in raws:  # a malformed batch is no clause
            out += (read_clauses(raw, MAX_BATCH_CLAUSES) if len(raw) <= MAX_CLAUSES_BYTES else None) or []
        return out, since + len(raws)

    def _push(self, chunk: int, row: int, clauses: list[Clause]) -> None:
        """Share clauses in batches (at most MAX_SHARED_BATCHES per race: more are not shared)."""
        for start in range(0, len(clauses), MAX_BATCH_CLAUSES):
            if not self._append(
                chunk, row, json.dumps([list(c) for c in clauses[start : start + MAX_BATCH_CLAUSES]])
            ):
                return


@dataclass
class _Race:
    """The puzzle the owner searches now."""

    row: int
    text: str
    started: float
    flag: np.ndarray
    exchange: Exchange
    escalated: bool = False
    called: int = 0
    winner: int | None = None
    unsolvable: bool = False  # the helpers proved it: every cube refuted (`split`), or one helper's own proof
    split: bool = False
    entries: dict[int, HelperEntry] = field(default_factory=dict)
    side: int = 0  # the grid's side, read at the first escalation
    cursor: int = 0  # shared clauses read so far


class Escalation:
    """The owner's escalation of one chunk (see the module docstring); a context manager running its thread.

    `stop` is the chunk's own flag (a purge): raised, it stops the puzzle searched now too.
    """

    def __init__(
        self,
        task: ChunkTask,
        board: Board,
        stop: np.ndarray,
        poll_s: float = 0.25,
        grace_s: float = GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.task = task
        self.board = board
        self.stop = stop
        self.after = float(task.escalate_after or 0.0)
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.clock = clock
        self._texts: list[str] | None = None  # split once a puzzle is searched: easy chunks never are
        self.ends: dict[int, EscalationEnd] = {}
        self._current: _Race | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._entered = False  # the thread runs only inside `with` (tests drive `tick` by hand)

    @contextlib.contextmanager
    def racing(self, row: int) -> Iterator[Raced]:
        """`solve_many`'s hook: the stop flag of row `row`'s search, watched (and escalated) while it runs,
        and its exchange (the clauses the helpers share, imported by the owner's SAT members)."""
        if self._texts is None:
            self._texts = self.task.texts()
        race = _Race(row, self._texts[row], self.clock(), new_flag(), Exchange())
        if self.stop[0]:
            raise_flag(race.flag)
        with self._lock:
            self._current = race
            self._start()
        try:
            yield Raced(race.flag, race.exchange)
        finally:
            with self._lock:
                self._current = None
            if race.called:
                self.ends[row] = self._settle(race)

    def tick(self) -> None:
        """One poll: follow the chunk's stop, escalate when due, take a verified answer, call helpers."""
        with self._lock:
            race = self._current
            if race is None or race.winner is not None:
                return
            if self.stop[0]:
                raise_flag(race.flag)
                return
            if not race.escalated and self.clock() - race.started < self.after:
                return
            race.escalated = True
            chunk = self.task.chunk
            if race.called:  # the race is open: keep its lease, look for a verified grid or a proof
                self.board.open(chunk, race.row)
                race.entries = self.board.entries(chunk, race.row)
                race.winner = self._verified(race)
                self._trade(race)
                if race.winner is not None or race.unsolvable:
                    raise_flag(race.flag)
                    self.board.close(chunk, race.row)  # the other helpers stop now
                    return
            waiting = race.called - len(race.entries)  # called, not started yet
            wanted = min(MAX_HELPERS - race.called, self.board.idle() - waiting)
            if wanted > 0 and not race.called:  # opened only once there is a helper to call
                self.board.open(chunk, race.row)
            total = race.called + max(0, wanted)  # helpers called once this round's are
            for _ in range(max(0, wanted)):
                race.called += 1
                self.board.call(self._task(race, total))

    def _trade(self, race: _Race) -> None:
        """Hand the owner's search the clauses the helpers shared; note a proof that there is no solution
        (every cube of the split refuted, or a helper's own)."""
        chunk = self.task.chunk
        clauses, race.cursor = self.board.shared(chunk, race.row, race.cursor)
        race.exchange.offer([c for c in clauses if valid_clause(c, race.side)])
        cubes = self.board.cubes(chunk, race.row)
        if cubes and self.board.refuted(chunk, race.row) >= set(range(len(cubes))):
            race.unsolvable = race.split = True
        if any(e.state == "done" and e.status == Status.UNSOLVABLE for e in race.entries.values()):
            race.unsolvable = True

    def _side(self, race: _Race) -> int:
        """The side of the raced puzzle's grid (0: unreadable, which makes no split)."""
        try:
            return parse_puzzle(race.text, self.task.box).box.n
        except (PuzzleError, ValueError):
            return 0

    def _task(self, race: _Race, helpers: int) -> HelperTask:
        """The task of the next helper of `race`: another seed, another variant, and whether it searches
        cubes of a split (`solvers.shares.helper_splits`), of at least how many."""
        t = self.task
        if not race.side:
            race.side = self._side(race)
        return HelperTask(
            job=t.job,
            chunk=t.chunk,
            row=race.row,
            helper=race.called,
            puzzle=race.text,
            box=t.box,
            time_limit=t.time_limit,
            portfolio=t.portfolio,
            seed=helper_seed(t.job, t.chunk, race.row, race.called),
            cubes=helper_splits(race.side, race.called, helpers),
        )

    def _verified(self, race: _Race) -> int | None:
        """The first helper (lowest number) whose posted grid the independent verifier accepts."""
        for helper, entry in sorted(race.entries.items()):
            if entry.state == "done" and entry.solution and self._accepts(race.text, entry.solution):
                return helper
        return None

    def _accepts(self, text: str, solution: str) -> bool:
        """True when `solution` is a valid grid keeping every given of `text` (`solvers.model.verify`)."""
        try:
            puzzle = parse_puzzle(text, self.task.box)
            grid = parse_puzzle(solution, self.task.box)
        except (PuzzleError, ValueError):
            return False
        return grid.box == puzzle.box and is_solution(puzzle, grid.givens)

    def _settle(self, race: _Race) -> EscalationEnd:
        """Close the race, wait (up to `grace_s`) for every started helper's last entry, and forget it."""
        chunk = self.task.chunk
        try:
            self.board.close(chunk, race.row)
            until = self.clock() + self.grace_s
            entries = self.board.entries(chunk, race.row)
            while any(e.state != "done" for e in entries.values()) and self.clock() < until:
                time.sleep(SETTLE_POLL_S)
                entries = self.board.entries(chunk, race.row)
            race.entries = {**race.entries, **entries} if entries else race.entries
            if race.winner is None:
                race.winner = self._verified(race)
            if race.winner is None and not race.unsolvable:
                self._trade(race)
            self.board.drop(chunk, race.row)
        except Exception as exc:  # noqa: BLE001 - the owner's own answer stands; the record is written
            log.warning("race of chunk %s row %s: helpers' answers lost: %s", chunk, race.row, exc)
        proved = race.unsolvable and race.winner is None
        return EscalationEnd(dict(race.entries), race.winner, proved, proved and race.split)

    def _run(self) -> None:
        while not self._done.wait(self.poll_s):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - a broker blinking must not stop the owner's search
                log.warning("escalation of chunk %s: %s", self.task.chunk, exc)

    def _start(self) -> None:
        """Start the polling thread at the first puzzle searched (a chunk the batch's first pass answers
        whole, the usual easy one, never starts it: no thread, no wake-ups)."""
        if self._entered and self._thread is None and not self._done.is_set():
            self._thread = threading.Thread(target=self._run, name="escalation", daemon=True)
            self._thread.start()

    def __enter__(self) -> Escalation:
        self._entered = True
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class BoardCubes:
    """A helper's `solvers.race.exchange.CubeSource`: the race's cubes on its board. A board that fails is
    logged and read as "no cube" (the helper searches the whole puzzle instead); cubes that are no
    cubes of this grid are none."""

    def __init__(self, board: Board, task: HelperTask, side: int) -> None:
        self.board, self.task, self.side = board, task, side
        self.count = 0

    def _safely(self, what: str, call: Callable[[], object]) -> object:
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - the search goes on without the board
            log.warning("race of chunk %s row %s: %s: %s", self.task.chunk, self.task.row, what, exc)
            return None

    def _checked(self, cubes: object) -> list[Cube] | None:
        if not isinstance(cubes, list) or not all(valid_cube(c, self.side) for c in cubes):
            return None
        self.count = len(cubes)
        return cubes

    def published(self) -> list[Cube] | None:
        t = self.task
        return self._checked(self._safely("reading the cubes", lambda: self.board.cubes(t.chunk, t.row)))

    def publish(self, split: Cubes) -> list[Cube]:
        t = self.task
        stored = self._safely(
            "publishing the cubes",
            lambda: self.board.publish_cubes(t.chunk, t.row, list(split.cubes), list(split.units)),
        )
        return self._checked(stored) or []

    def take(self) -> int | None:
        t = self.task
        if not self.count:
            return None
        taken = self._safely(
            "taking a cube", lambda: self.board.take_cube(t.chunk, t.row, t.helper, self.count)
        )
        return taken if isinstance(taken, int) else None

    def refute(self, index: int, clause: Clause) -> None:
        t = self.task
        self._safely(
            "handing back a refuted cube", lambda: self.board.refute_cube(t.chunk, t.row, index, clause)
        )


class _Trade:
    """A helper's poll: keep its cube's claim alive, hand its search the clauses shared since the last
    poll, and say whether the race is over (the `StopPoller` condition)."""

    def __init__(self, board: Board, task: HelperTask, exchange: Exchange, side: int) -> None:
        self.board, self.task, self.exchange, self.side = board, task, exchange, side
        self.cursor = 0

    def __call__(self) -> bool:
        t = self.task
        if self.exchange.holding is not None:
            self.board.hold_cube(t.chunk, t.row, t.helper, self.exchange.holding)
        clauses, self.cursor = self.board.shared(t.chunk, t.row, self.cursor)
        self.exchange.offer([c for c in clauses if valid_clause(c, self.side)])
        return self.board.over(t.chunk, t.row)


def _side(task: HelperTask) -> int:
    """The side of a helper's puzzle (0: unreadable; its race answers `invalid` as the owner's does)."""
    try:
        return parse_puzzle(task.puzzle, task.box).box.n
    except (PuzzleError, ValueError):
        return 0


def run_helper(task: HelperTask, board: Board, poll_s: float) -> SolveResult | None:
    """Race one puzzle as helper `task.helper` until it is answered anywhere (what a worker or a local
    process runs for a `HelperTask`); its result, or None when the race was over before it started.

    The helper writes no record: it posts `started`, races under a stop poller watching the
    board (closed, the owner's lease lapsed, the job stopped: it gives up at its solvers' next
    slice), then posts its answer and counters; a solved grid also closes the race, so the
    other helpers stop within a poll. The owner verifies the grid before it takes it. Every
    poll also hands its SAT members the clauses the others shared; with `task.cubes` > 0 they
    search cubes of the race's split (`solvers.race.exchange`), refuted ones shared as clauses.
    """
    from solvers.api import solve_many  # the compiled solvers load only where puzzles are solved

    if board.over(task.chunk, task.row):
        return None
    board.post(task.chunk, task.row, task.helper, HelperEntry(state="started"))
    side = _side(task)
    cubes = BoardCubes(board, task, side) if task.cubes and side else None
    exchange = Exchange(cubes, want=task.cubes)
    with StopPoller(_Trade(board, task, exchange, side), poll_s) as poller:
        (result,) = solve_many(
            [task.puzzle], box=task.box, time_limit=task.time_limit, portfolio=task.portfolio,
            seed=task.seed, stop=poller.flag, variant=task.helper,
            racing=lambda _: contextlib.nullcontext(Raced(poller.flag, exchange)),
        )  # fmt: skip
    board.post(task.chunk, task.row, task.helper, HelperEntry.of(result))
    if result.status in (Status.SOLVED, Status.UNSOLVABLE):
        board.close(task.chunk, task.row)
    return result
