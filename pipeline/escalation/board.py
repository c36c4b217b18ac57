"""The owner's side of one puzzle escalated across processes (`Escalation`: idle processes called as helpers,
the first verified grid taken) and the `Board` where owner and helpers meet (docs/pipeline.md, Escalation)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import numpy as np

from pipeline.contract.tasks import ChunkTask
from pipeline.engine.stop import StopPoller
from pipeline.escalation.task import (
    ANYONE,
    MAX_CLAUSES_BYTES,
    MAX_HELPERS,
    BoardCubes,
    ClauseRounds,
    EscalationEnd,
    HelperEntry,
    HelperTask,
    batch_texts,
    helper_seed,
    read_batch,
    read_clauses,
    side_of,
)
from solvers.kernel.stop import new_flag, raise_flag
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import PuzzleError
from solvers.model.result import SolveResult
from solvers.model.status import Status
from solvers.model.verify import is_solution
from solvers.race.cubes import MAX_CUBE_CELLS, MAX_CUBES, Clause, Cube
from solvers.race.exchange import Exchange, Raced
from solvers.shares import helper_cubes

log = logging.getLogger(__name__)
GRACE_S = 1.5  # how long a closed escalation waits for its helpers' last counters (see `_settle`)
SETTLE_POLL_S = 0.05
OWNER = -1  # the owner's clauses' sender on the board (helpers are 1, 2, ...)
# The owner's SAT searches export learnt clauses only when a process is idle as the search starts: exporting
# needs `share/`'s CaDiCaL, slower alone, and a lone worker's search must not change (decisions.md).


class Board(Protocol):
    """Where the owner of a chunk and the helpers racing its puzzles meet (one job): each form writes `open`
    to `call` and the cubes' primitives (`_create` to `_batches`); the cube logic is written here once."""

    job: str

    def open(self, chunk: int, row: int) -> None:
        """Owner: the puzzle is escalated (set or refresh its lease)."""

    def over(self, chunk: int, row: int) -> bool:
        """Helper: True once the puzzle needs no more search (closed, lease lapsed, job stopped)."""

    def close(self, chunk: int, row: int) -> None:
        """Anyone: end the escalation (helpers stop at their next poll)."""

    def post(self, chunk: int, row: int, helper: int, entry: HelperEntry) -> None:
        """Helper: publish its state (`started`, then `done` with answer and counters)."""

    def entries(self, chunk: int, row: int) -> dict[int, HelperEntry]:
        """Every helper's last entry (malformed ones left out)."""

    def drop(self, chunk: int, row: int) -> None:
        """Owner: forget the escalation (its entries are folded)."""

    def idle(self) -> int:
        """Processes that could take a helper task now."""

    def call(self, task: HelperTask) -> None:
        """Send one helper task."""

    def _create(self, chunk: int, row: int, cubes: str) -> bool | None:
        """Store the cubes' JSON unless some are stored: True when these were (None: the job is gone)."""

    def _stored(self, chunk: int, row: int) -> str | bytes | None:
        """The search's cubes' JSON as stored."""

    def _claim(self, chunk: int, row: int, helper: int, index: int, renew: bool) -> bool:
        """Hold cube `index` for `helper` (a lease) unless it is held; `renew`: refresh the holder's lease."""

    def _mark(self, chunk: int, row: int, index: int, clause: str) -> bool:
        """Note cube `index` refuted (`clause`: why, as JSON), free its hold; False when the job is gone."""

    def _marked(self, chunk: int, row: int) -> list[Any]:
        """The refuted cubes' numbers as stored (texts)."""

    def _append(self, chunk: int, row: int, batch: str) -> bool:
        """Append a batch of shared clauses (JSON); False when MAX_SHARED_BATCHES are there already."""

    def _batches(self, chunk: int, row: int, since: int) -> list[Any]:
        """The shared batches from position `since` on, as stored."""

    def publish_cubes(
        self, chunk: int, row: int, cubes: list[Cube], units: list[Clause]
    ) -> list[Cube] | None:
        """Helper: offer a split (and the unit clauses found making it); return the escalation's cubes, the
        first split offered (None: unreadable)."""
        created = self._create(chunk, row, json.dumps([list(c) for c in cubes]))
        if created and units:
            self.push(chunk, row, units)
        return None if created is None else self.cubes(chunk, row)

    def cubes(self, chunk: int, row: int) -> list[Cube] | None:
        """The escalation's cubes (None: not split yet, or unreadable)."""
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
            self.push(chunk, row, [clause])

    def refuted(self, chunk: int, row: int) -> set[int]:
        """The cubes refuted so far."""
        return {int(index) for index in self._marked(chunk, row) if index.isdigit()}

    def shared(
        self, chunk: int, row: int, since: int, me: int | None = None, side: int = 0, learnt: bool = True
    ) -> tuple[list[Clause], int]:
        """The clauses shared from position `since` on (but `me`'s own; `learnt` False: only `ANYONE`'s,
        the refutations and units), and the position after them; a batch that is no batch of this
        escalation's clauses (`read_batch`) is refused in one log line."""
        raws = self._batches(chunk, row, since)
        out: list[Clause] = []
        for at, raw in enumerate(raws, since):
            batch, error = read_batch(raw, self.job, side)
            if batch is None:
                log.warning(
                    "escalation of chunk %s row %s: shared batch %d refused: %s", chunk, row, at, error
                )
            elif batch.sender != me and (learnt or batch.sender == ANYONE):
                out += [tuple(c) for c in batch.clauses]
        return out, since + len(raws)

    def push(self, chunk: int, row: int, clauses: list[Clause], sender: int = ANYONE) -> bool:
        """Share clauses in batches from `sender`; False once MAX_SHARED_BATCHES are there (none shared)."""
        return all(self._append(chunk, row, batch) for batch in batch_texts(self.job, clauses, sender))


@dataclass
class _Search:
    """The puzzle the owner searches now."""

    row: int
    text: str
    started: float
    flag: np.ndarray
    exchange: Exchange
    escalated: bool = False
    called: int = 0
    winner: int | None = None
    unsolvable: bool = False  # the helpers proved it: every cube refuted, or one helper's own proof
    cubes_refuted: bool = False
    entries: dict[int, HelperEntry] = field(default_factory=dict)
    side: int = 0  # the grid's side, read at the first escalation
    rounds: ClauseRounds | None = None  # its clause trade, from the first helper called


class Escalation:
    """The owner's escalation of one chunk, a context manager running its polling thread; `stop` is the
    chunk's own flag (a purge): raised, it stops the puzzle searched now too."""

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
        self._current: _Search | None = None
        self._lock = threading.Lock()
        self._poller: StopPoller | None = None  # asks `tick` every poll_s (a broker blinking is logged)
        self._entered = False  # the thread runs only inside `with` (tests drive `tick` by hand)

    @contextlib.contextmanager
    def racing(self, row: int) -> Iterator[Raced]:
        """`solve_many`'s hook: the stop flag of row `row`'s search, watched (and escalated) while it runs,
        and its exchange (the clauses the helpers share, imported by the owner's SAT members)."""
        if self._texts is None:
            self._texts = self.task.texts()
        search = _Search(row, self._texts[row], self.clock(), new_flag(), Exchange(sharing=self._helpable()))
        if self.stop[0]:
            raise_flag(search.flag)
        with self._lock:
            self._current = search
            self._start()
        try:
            yield Raced(search.flag, search.exchange)
        finally:
            with self._lock:
                self._current = None
            if search.called:
                self.ends[row] = self._settle(search)

    def _helpable(self) -> bool:
        """True when a process is idle now (the owner's searches then share their learnt clauses)."""
        try:
            return self.after > 0 and self.board.idle() > 0
        except Exception as exc:  # noqa: BLE001 - the search goes on, importing only
            log.warning("escalation of chunk %s: idle processes unknown: %s", self.task.chunk, exc)
            return False

    def tick(self) -> None:
        """One poll: follow the chunk's stop, escalate when due, take a verified answer, call helpers."""
        with self._lock:
            search = self._current
            if search is None or search.winner is not None:
                return
            if self.stop[0]:
                raise_flag(search.flag)
                return
            if not search.escalated and self.clock() - search.started < self.after:
                return
            search.escalated = True
            chunk = self.task.chunk
            if search.called:  # the escalation is open: keep its lease, look for a verified grid or a proof
                self.board.open(chunk, search.row)
                search.entries = self.board.entries(chunk, search.row)
                search.winner = self._verified(search)
                self._trade(search)
                if search.winner is not None or search.unsolvable:
                    raise_flag(search.flag)
                    self.board.close(chunk, search.row)  # the other helpers stop now
                    return
            waiting = search.called - len(search.entries)  # called, not started yet
            wanted = min(MAX_HELPERS - search.called, self.board.idle() - waiting)
            if wanted > 0 and not search.called:  # opened only once there is a helper to call
                self.board.open(chunk, search.row)
            total = search.called + max(0, wanted)  # helpers called once this round's are
            for _ in range(max(0, wanted)):
                search.called += 1
                self.board.call(self._task(search, total))

    def _trade(self, search: _Search) -> None:
        """Hand the owner's search the clauses the helpers shared; note a proof that there is no solution
        (every cube of the split refuted, or a helper's own)."""
        chunk = self.task.chunk
        if search.rounds is None:
            search.rounds = ClauseRounds(self.board, chunk, search.row, OWNER)
        search.rounds.round(search.exchange, search.side)
        cubes = self.board.cubes(chunk, search.row)
        if cubes and self.board.refuted(chunk, search.row) >= set(range(len(cubes))):
            search.unsolvable = search.cubes_refuted = True
        if any(e.state == "done" and e.status == Status.UNSOLVABLE for e in search.entries.values()):
            search.unsolvable = True

    def _task(self, search: _Search, helpers: int) -> HelperTask:
        """The task of the next helper of `search`: another seed, another variant, and whether it searches
        cubes of a split (`solvers.shares.helper_cubes`), of at least how many."""
        t, k = self.task, search.called
        if not search.side:
            search.side = side_of(search.text, t.box)
        return HelperTask(
            job=t.job,
            chunk=t.chunk,
            row=search.row,
            helper=k,
            puzzle=search.text,
            box=t.box,
            time_limit=t.time_limit,
            portfolio=t.portfolio,
            seed=helper_seed(t.job, t.chunk, search.row, k),
            cubes=helper_cubes(search.side, k, helpers),
        )

    def _verified(self, search: _Search) -> int | None:
        """The first helper (lowest number) whose posted grid the independent verifier accepts."""
        for helper, entry in sorted(search.entries.items()):
            if entry.state == "done" and entry.solution and self._accepts(search.text, entry.solution):
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

    def _settle(self, search: _Search) -> EscalationEnd:
        """Close the escalation, take every helper's last entry, forget it. When the helpers answered, it
        waits (up to `grace_s`) for each one's last counters, as they end anyway; when the owner's own search
        ended, only for a helper that has posted none yet: each posts its counters so far every poll."""
        chunk = self.task.chunk
        ended_by_helpers = search.winner is not None or search.unsolvable

        def waiting(entry: HelperEntry) -> bool:
            return entry.state != "done" and (ended_by_helpers or not entry.counters)

        try:
            self.board.close(chunk, search.row)
            until = self.clock() + self.grace_s
            entries = self.board.entries(chunk, search.row)
            while any(waiting(e) for e in entries.values()) and self.clock() < until:
                time.sleep(SETTLE_POLL_S)
                entries = self.board.entries(chunk, search.row)
            search.entries = {**search.entries, **entries} if entries else search.entries
            if search.winner is None:
                search.winner = self._verified(search)
            if search.winner is None and not search.unsolvable:
                self._trade(search)
            self.board.drop(chunk, search.row)
        except Exception as exc:  # noqa: BLE001 - the owner's own answer stands; the record is written
            log.warning("escalation of chunk %s row %s: helpers' answers lost: %s", chunk, search.row, exc)
        proved = search.unsolvable and search.winner is None
        return EscalationEnd(dict(search.entries), search.winner, proved, proved and search.cubes_refuted)

    def _start(self) -> None:
        """Start the polling thread at the first puzzle searched (a chunk the batch's first pass answers
        whole, the usual easy one, never starts it: no thread, no wake-ups)."""
        if self._entered and self._poller is None:
            failed = partial(log.warning, "escalation of chunk %s: %s", self.task.chunk)
            self._poller = StopPoller(self._poll, self.poll_s, on_error=failed, name="escalation").__enter__()

    def _poll(self) -> bool:
        """The poller's condition: one `tick`, never "stop" (`tick` raises the owner's flags)."""
        self.tick()
        return False

    def __enter__(self) -> Escalation:
        self._entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._entered = False
        if self._poller is not None:
            self._poller.__exit__(None, None, None)
            self._poller = None


def run_helper(task: HelperTask, board: Board, poll_s: float) -> SolveResult | None:
    """Search one puzzle as helper `task.helper` until it is answered anywhere; its result (posted, never a
    record: the owner verifies it), or None when the escalation was over before it started."""
    from solvers.api import solve_many  # the compiled solvers load only where puzzles are solved

    if board.over(task.chunk, task.row):
        return None
    board.post(task.chunk, task.row, task.helper, HelperEntry(state="started"))
    side = side_of(task.puzzle, task.box)
    cubes = BoardCubes(board, task, side) if task.cubes and side else None
    exchange = Exchange(cubes, want=task.cubes, sharing=True)
    rounds = ClauseRounds(board, task.chunk, task.row, task.helper, learnt=bool(task.cubes))

    def trade() -> bool:
        """A poll: keep the cube's claim alive, post the counters so far, import the clauses shared since;
        True once it is over."""
        if exchange.holding is not None:
            board.hold_cube(task.chunk, task.row, task.helper, exchange.holding)
        if (counters := exchange.progress()) is not None:
            board.post(task.chunk, task.row, task.helper, HelperEntry(state="started", counters=counters))
        rounds.round(exchange, side)
        return board.over(task.chunk, task.row)

    with StopPoller(trade, poll_s) as poller:
        (result,) = solve_many(
            [task.puzzle],
            box=task.box,
            time_limit=task.time_limit,
            portfolio=task.portfolio,
            seed=task.seed,
            stop=poller.flag,
            variant=task.helper,
            racing=lambda _: contextlib.nullcontext(Raced(poller.flag, exchange)),
        )
    board.post(task.chunk, task.row, task.helper, HelperEntry.of(result))
    if result.status in (Status.SOLVED, Status.UNSOLVABLE):
        board.close(task.chunk, task.row)
    return result
