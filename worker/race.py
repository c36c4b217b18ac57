"""One puzzle across the fleet, the helper's side: the task `sudoku_batch.race_puzzle` races one puzzle of
another worker's chunk (`pipeline.escalation.board.run_helper`) on the Redis board (`worker.board`).

Its message is acknowledged early: a helper killed mid-race is not redelivered (the owner,
which writes the record, races on; it waits for a started helper's last counters only
`GRACE_S`).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from pydantic import ValidationError

from pipeline.contract.tasks import HELPER_TASK_NAME
from pipeline.escalation.board import run_helper
from pipeline.escalation.task import HelperTask
from solvers.model.result import Status
from worker.app import app
from worker.board import RedisBoard
from worker.config import settings
from worker.heartbeat import CURRENT
from worker.tasks import BadArguments, one_line, only_task, validation_reasons

log = logging.getLogger(__name__)


def handle_race(payload: Any, client: Any) -> int:
    """Race one puzzle as helper `task.helper` (`pipeline.escalation.board.run_helper`); 1 if it solved it."""
    task = HelperTask.model_validate(payload)
    with CURRENT.solving(client, f"{task.job}:{task.chunk}:race"):  # not idle while it races
        result = run_helper(task, RedisBoard(client, task.job), settings.stop_poll_s)
    return int(result is not None and result.status == Status.SOLVED)


@app.task(name=HELPER_TASK_NAME, ignore_result=True, acks_late=False)
def race_puzzle_task(*args: Any, **kwargs: Any) -> int:
    """Celery entry point (by name): `task=` a HelperTask; see `handle_race`. Refusals: one log line."""
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
