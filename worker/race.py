"""One puzzle across the fleet, the helper's side: the task `sudoku_batch.race_puzzle` races one puzzle of
another worker's chunk (`pipeline.race`), on the Redis board (`worker.board`).

A helper writes no record: it posts `started`, races the puzzle under a stop poller that
watches the race's keys (closed, the owner's lease lapsed, or the job purged: it stops at
its solvers' next slice), then posts its answer and counters; a verified grid also closes
the race, so the other helpers stop within a poll. Its message is acknowledged early: a
helper killed mid-race is not redelivered (the owner, which writes the record, races on).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import redis
from pydantic import ValidationError

from pipeline.keys import current_key
from pipeline.race import RaceEntry, RaceTask
from pipeline.solve import worker_name
from pipeline.stop import StopPoller
from pipeline.tasks import RACE_TASK_NAME
from solvers.result import Status
from worker.app import app
from worker.board import RedisBoard
from worker.config import settings
from worker.tasks import BadArguments, one_line, only_task, validation_reasons

log = logging.getLogger(__name__)


def handle_race(payload: Any, client: Any) -> int:
    """Race one puzzle as helper `task.helper` until it is answered anywhere; 1 if this helper solved it."""
    from solvers.api import solve_many

    task = RaceTask.model_validate(payload)
    board = RedisBoard(client, task.job)
    if board.over(task.chunk, task.row):
        return 0  # answered, its owner gone, or the job purged before this helper started
    with contextlib.suppress(redis.OutOfMemoryError):  # bookkeeping: not idle while it races
        client.hset(current_key(settings.key_prefix), worker_name(), f"{task.job}:{task.chunk}:race")
    try:
        board.post(task.chunk, task.row, task.helper, RaceEntry(state="started"))
        with StopPoller(lambda: board.over(task.chunk, task.row), settings.stop_poll_s) as poller:
            (result,) = solve_many(
                [task.puzzle], box=task.box, time_limit=task.time_limit, portfolio=task.portfolio,
                seed=task.seed, stop=poller.flag, variant=task.helper,
            )  # fmt: skip
        board.post(task.chunk, task.row, task.helper, RaceEntry.of(result))
        if result.status == Status.SOLVED:
            board.close(task.chunk, task.row)  # the other helpers stop now; the owner verifies and writes
            return 1
        return 0
    finally:
        client.hdel(current_key(settings.key_prefix), worker_name())


@app.task(name=RACE_TASK_NAME, ignore_result=True, acks_late=False)
def race_puzzle_task(*args: Any, **kwargs: Any) -> int:
    """Celery entry point (by name): `task=` a RaceTask; see `handle_race`. Refusals: one log line."""
    from worker.connection import store_client

    try:
        return handle_race(only_task(args, kwargs), store_client())
    except ValidationError as exc:
        log.error("dropping a malformed race message: %s", validation_reasons(exc)[:500])
    except BadArguments as exc:
        log.error("dropping a malformed race message: %s", exc)
    except (ValueError, redis.ResponseError) as exc:
        log.error("dropping a race message: %s", one_line(exc))
    return 0
