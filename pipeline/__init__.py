"""The contract between the client and the workers: tasks, results, their wire form, the Redis layout.

`solvers` is the solving library and knows nothing of jobs; `client` and `worker` both
import this package and never each other:

- `tasks`: the task messages (`ChunkTask`, `ChunkRef`), task names and queue, version
  numbers, bounds, the outbox entry; `generate`: the generate task and its result.
- `runs`: puzzle positions as (first, count) runs, texts joined into one string.
- `columns`: `ResultColumns`, one chunk's results as the arrays that travel and that every
  renderer reads; explicit status codes; the record fields.
- `wire`: those columns as bytes; `result`: a stored chunk result (header + columns).
- `solve`: `solve_chunk`, the function both transports run; the pipeline's own answers.
- `render`: JSON Lines (compiled), CSV, Parquet and Python records from the columns.
- `keys`: where a job lives in Redis and the idempotent result write; `stop`: `StopPoller`.
"""
