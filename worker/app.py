"""The Celery app (`celery -A worker.app worker`), configured from `WorkerSettings`: JSON only, late acks
with requeue when a worker process dies, one chunk prefetched per process, time limits as a safety net under
the producer's per-chunk ones (docs/pipeline.md); signals end it at once (`worker.shutdown`).
"""

from __future__ import annotations

import logging
import ssl
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init
from kombu.utils.objects import cached_property

from pipeline.contract.tasks import BROKER_PRIORITIES
from worker.config import settings


class App(Celery):
    """The Celery app, whose `celery worker` application is `worker.shutdown.Worker`."""

    @cached_property
    def Worker(self) -> Any:  # noqa: N802 - Celery's name
        return self.subclass_with_self("worker.shutdown:Worker")


app = App("sudoku_batch", broker=settings.broker, include=["worker.tasks"])
app.conf.update(
    broker_transport="worker.broker:Transport",  # kombu's Redis transport, surviving a full Redis
    worker_consumer="worker.consumer:Consumer",  # refused and malformed messages: one log line each
    task_serializer="json",
    accept_content=["json"],
    result_serializer="json",
    result_accept_content=["json"],
    event_serializer="json",
    task_ignore_result=True,
    result_backend=None,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    task_acks_on_failure_or_timeout=False,  # a chunk that failed is redelivered, then answered as error
    worker_prefetch_multiplier=1,
    task_default_queue=settings.queue,
    task_soft_time_limit=settings.soft_time_limit,
    task_time_limit=settings.time_limit,
    broker_transport_options={
        "visibility_timeout": settings.visibility_timeout,
        "socket_connect_timeout": settings.connect_timeout,
        "socket_timeout": settings.socket_timeout,
        "socket_keepalive": True,
        **BROKER_PRIORITIES,  # a worker pops the first non-empty priority list (`message_priority`)
    },
    broker_connection_timeout=settings.connect_timeout,
    broker_connection_retry_on_startup=True,
    broker_channel_error_retry=True,  # a command Redis refuses (maxmemory) restarts the consumer only
    worker_cancel_long_running_tasks_on_connection_loss=True,
    worker_send_task_events=False,
    task_send_sent_event=False,
    worker_hijack_root_logger=False,
    worker_proc_alive_timeout=120.0,  # a pool process warms the numba cache before it is up
)
if settings.broker.startswith("rediss://") and "ssl_cert_reqs" not in settings.broker:
    app.conf.broker_use_ssl = {"ssl_cert_reqs": ssl.CERT_REQUIRED}


@worker_init.connect
def _warm_main(**_: Any) -> None:
    """Load the compiled solvers in the main process, so forked pool processes start warm (and say so
    in the log when a cold cache makes that a compile)."""
    import gc

    from pipeline.engine.memory import reuse_freed_memory
    from pipeline.engine.solve import warm
    from solvers.warm import on_first_compile

    reuse_freed_memory()  # inherited by the pool processes: a chunk's buffers are reused, not re-faulted
    on_first_compile(logging.getLogger(__name__).warning)
    warm()
    gc.freeze()  # the warm objects stay out of the collector here and in the forked pool processes


@worker_process_init.connect
def _warm_process(**_: Any) -> None:
    """Make sure each pool process is warm (free after a warm fork) and start its liveness beat."""
    from pipeline.engine.solve import warm
    from worker.heartbeat import start_heartbeat

    warm()
    start_heartbeat(app)
