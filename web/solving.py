"""One puzzle at a time: checked at the edge, then solved as a one-puzzle chunk by the pipeline's runner (in a
local process) or as a one-puzzle job (through the broker), so its answer is exactly a verified JSON Lines
record. The one module of `web` that builds chunk tasks itself.
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from client.batch import BatchClient
from client.collector import JobFailed
from client.job import Written
from client.pool import WarmPool
from client.summary import Summary
from pipeline.contract.part import Part
from pipeline.contract.runs import join_texts
from pipeline.contract.tasks import MAX_SEED, ChunkTask, solver_seed
from pipeline.engine.runner import ListPort, execute
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import PuzzleError, as_box
from web.another import DIED, MAX_EXCLUDE
from web.errors import ANSWER_GRACE_S, ApiError, in_pool
from web.settings import ServeSettings

MAX_OPTION_CHARS = 200  # portfolio and box texts
INPUT_NAME = "web"  # the `input` field of a single puzzle's record


class SolveRequest(BaseModel):
    """`POST /api/solve`: a puzzle and how to solve it."""

    model_config = ConfigDict(extra="forbid")

    puzzle: str
    box: str | None = Field(default=None, max_length=MAX_OPTION_CHARS)
    time_limit: float | None = Field(default=None, gt=0)
    portfolio: str | None = Field(default=None, max_length=MAX_OPTION_CHARS)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    exclude: list[str] = Field(default_factory=list, max_length=MAX_EXCLUDE)  # "New solution": grids shown


class Checked(BaseModel):
    """A request that passed every check: one line of puzzle text, its box, and bounded options."""

    text: str
    box: str
    time_limit: float
    portfolio: str | None
    seed: int


def check_request(req: SolveRequest, settings: ServeSettings) -> Checked:
    """Bound every field, parse the puzzle and the portfolio; ApiError (4xx) naming what is wrong."""
    if len(req.puzzle) > settings.max_puzzle_chars:
        most = settings.max_puzzle_chars
        raise ApiError(413, f"the puzzle is {len(req.puzzle):,} characters; at most {most:,} are accepted")
    limit = settings.default_time_limit if req.time_limit is None else req.time_limit
    if not math.isfinite(limit) or limit > settings.max_time_limit:
        raise ApiError(
            422, f"time_limit {limit:g}: this server allows at most {settings.max_time_limit:g} s per puzzle"
        )
    try:
        box = as_box(req.box)
        puzzle = parse_puzzle(req.puzzle, box)
    except PuzzleError as exc:
        raise ApiError(422, f"not a puzzle: {exc}") from None
    portfolio = req.portfolio or None
    check_portfolio(portfolio)
    text = req.puzzle.strip()
    if "\n" in text:  # one row per line: one line in the same notation, as every record holds it
        text = puzzle.render()
    return Checked(text=text, box=str(puzzle.box), time_limit=limit, portfolio=portfolio, seed=req.seed)


def check_portfolio(portfolio: str | None) -> None:
    """ApiError 422 naming an unknown solver or preset (the solvers here know every name)."""
    from solvers.api import solve_many

    try:
        solve_many([], portfolio=portfolio)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None


def solve_record(checked: Checked) -> str:
    """Solve one checked puzzle as a one-puzzle chunk; its JSON Lines record (runs in a pool process)."""
    joined, spans = join_texts([checked.text])
    task = ChunkTask(
        job=uuid.uuid4().hex,
        chunk=0,
        input=INPUT_NAME,
        index_runs=[(0, 1)],
        line_runs=[(1, 1)],
        puzzles=joined,
        spans=spans,
        box=checked.box,
        time_limit=checked.time_limit,
        format="jsonl",
        portfolio=checked.portfolio,
        seed=solver_seed(str(checked.seed), 0),  # a one-puzzle job's (`JobSpec`)
    )
    port = ListPort()
    execute(task, port)  # the one way a task runs, as a worker's or a local process's
    (part,) = port.parts
    return part.lines()[0].decode()


class Busy:
    """Counts single puzzles in progress; a request beyond `most` gets a 429 instead of a long queue."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.now = 0

    def __enter__(self) -> Busy:
        if self.now >= self.most:
            raise ApiError(429, f"{self.now} puzzles are being solved already; try again in a few seconds")
        self.now += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.now -= 1


class Solver:
    """Single puzzles, at most `max_pending` at once: embedded, in the server's own puzzle processes; with a
    broker, each a one-puzzle job for the workers, collected and purged here."""

    def __init__(self, client: BatchClient, pool: WarmPool, settings: ServeSettings) -> None:
        self.client = client
        self.pool = pool
        self.busy = Busy(settings.max_pending)

    async def solve(self, checked: Checked) -> dict[str, Any]:
        """The record of one puzzle, without blocking the event loop (a thread waits for a worker's)."""
        with self.busy:
            if not self.client.embedded:
                return await asyncio.to_thread(self._from_workers, checked)
            wait = checked.time_limit + ANSWER_GRACE_S
            line = await in_pool(self.pool, wait, "no answer", DIED, solve_record, checked)
        return json.loads(line)

    def _from_workers(self, checked: Checked) -> dict[str, Any]:
        if not self.client.store.live_workers():
            raise ApiError(503, "no live worker process for this broker: start one (`sudoku-batch worker`)")
        job = self.client.submit(
            [checked.text],
            time_limit=checked.time_limit,
            portfolio=checked.portfolio,
            box=checked.box,
            name=INPUT_NAME,
            seed=checked.seed,
        )
        answer, written, wait = Answer(), Written(), checked.time_limit + ANSWER_GRACE_S
        try:  # collected as the command line collects: each result leaves the store as it is read
            job.write(answer, Summary(), written, keep=False, idle_timeout=wait)
        except JobFailed as exc:
            raise ApiError(504, f"job {job.id}: {exc}") from None
        finally:
            job.purge(stop=not written.complete)
        return json.loads(answer.lines[0])


class Answer:
    """Where `Job.write` puts a one-puzzle job's record: kept here, for the page (nothing to make durable)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, result: Part, start: int, stop: int) -> None:
        self.lines += result.lines()[start:stop]

    def durable(self) -> dict[str, Any]:
        return {}

    def commit(self) -> None:
        """Nothing to commit: the record is read from `lines`."""
