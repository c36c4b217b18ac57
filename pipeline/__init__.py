"""Between the client and the workers: the contract they share, the engine that runs a task, the fleet race.

`solvers` is the solving library and knows nothing of jobs; `client` and `worker` both
import this package and never each other. Three rooms
(`tests/test_imports.py`: the contract loads nothing of the other two):

- `contract/`: the task messages and names (`tasks`, `generate`, the `outbox` entry), puzzle
  runs (`runs`), one chunk's results as columns (`columns`) and as bytes (`wire`), a `part`
  (its header, then its rendered records or its columns), the Redis layout (`keys`).
- `engine/`: how a task runs where it runs: `runner.run_chunk` on a `port.ChunkPort`,
  `solve.solve_parts` (the pipeline's own answers too), `render` (JSON Lines, CSV, Parquet,
  records), the `reader`, input `splits`, `storage`, `dataset` parts, `stop.StopPoller`.
- `escalation/`: one puzzle raced across the fleet: the helpers' `task`, the `board`.
"""
