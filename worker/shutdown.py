"""How a worker ends on SIGTERM, SIGINT or SIGHUP: at once, its running chunk's message back on the queue,
exit 128 + the signal (143, 130, 129), as every other `sudoku-batch` command.

Celery's own handling: SIGTERM and SIGINT are a warm shutdown, which waits for the running
chunk (a 20 s chunk kept the worker 20.7 s; exit 0 for SIGTERM, 1 for SIGINT); SIGHUP,
away from a terminal, re-executes `sys.argv` after that wait, which for `python -m
celery` is a path inside the package and fails ("attempted relative import with no known
parent package", exit 1: the worker gone). Here each is Celery's cold shutdown
(`on_cold_shutdown`): the consumer stops taking messages, the pool's running tasks are
terminated, and when the broker channel closes, kombu's Redis QoS puts every message it
delivered and nobody acknowledged back on its queue ("Restoring N unacknowledged
message(s)"): another worker takes the cut chunk at once, instead of after the orphan
sweep or the visibility timeout. Nothing of the chunk was written (results are written
whole, at its end); its delivery was counted, so a chunk cut short `max_attempts` times
is answered `error`. A second SIGINT or SIGQUIT during the shutdown forces it (Celery).
These are Celery's handlers, configured: the process is Celery's (`sudoku-batch worker`
exec'd it), not the command line's.
"""

from __future__ import annotations

import logging
import signal
from functools import partial
from typing import Any

from celery.apps.worker import Worker as CeleryWorker
from celery.apps.worker import install_worker_term_hard_handler, on_cold_shutdown

log = logging.getLogger(__name__)
ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # each ends the worker, exit 128 + its number


def cut_short(worker: Any, signum: signal.Signals) -> None:
    """Celery's cold shutdown, with the exit code 128 + `signum` (Celery would exit 0 or 1)."""
    worker.exitcode = 128 + signum
    log.warning(
        "%s: cutting the running chunks short (their messages go back to the queue), exit %d",
        signum.name,
        worker.exitcode,
    )
    on_cold_shutdown(worker)


class Worker(CeleryWorker):
    """Celery's worker application whose SIGTERM, SIGINT and SIGHUP end it at once (the module docstring)."""

    def install_platform_tweaks(self, worker: Any) -> None:
        super().install_platform_tweaks(worker)
        for signum in ENDING:
            install_worker_term_hard_handler(
                worker,
                sig=signum.name,
                callback=partial(cut_short, signum=signum),
                exitcode=128 + signum,
                verbose=False,
            )
