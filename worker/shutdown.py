"""How a worker ends on SIGTERM, SIGINT or SIGHUP: at once, its running chunk's message back on the queue,
exit 128 + the signal (143, 130, 129), as every other `sudoku-batch` command.

Celery's own handling waited for the running chunk (SIGTERM, SIGINT) or re-executed a path inside the package
and died (SIGHUP; docs/pipeline.md). Here each is Celery's cold shutdown: running tasks are terminated and
kombu puts every unacknowledged message back as the channel closes; a second SIGINT or SIGQUIT forces it.
These are Celery's handlers, configured: the process is Celery's (`sudoku-batch worker` exec'd it).
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
