"""sudoku-batch's client: producer, collector, job stores, the `sudoku-batch` command and `BatchClient`.

The client talks to workers only through the job store and task names; it never
imports `worker`.
"""

from client.batch import BatchClient, Job
from client.output import Record

__all__ = ["BatchClient", "Job", "Record"]
