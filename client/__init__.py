"""sudoku-batch's client: producer, collector, job stores, the `sudoku-batch` command and `BatchClient`.

It meets the workers only through the job store and task names (never imports `worker`). `BatchClient`, `Job`
and `Record` load on first use: the entry point imports this package before it can handle an interrupt."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2 ms before the handlers are in place)
if TYPE_CHECKING:
    from client.batch import BatchClient
    from client.job import Job
    from client.output import Record

__all__ = ["BatchClient", "Job", "Record"]


HOMES = {"BatchClient": "client.batch", "Job": "client.job", "Record": "client.output"}


def __getattr__(name: str) -> object:
    """`client.BatchClient`, `client.Job`, `client.Record`, imported when first asked for."""
    if name in HOMES:
        from importlib import import_module

        return getattr(import_module(HOMES[name]), name)
    raise AttributeError(f"module 'client' has no attribute {name!r}")
