"""The Celery adapter: settings, the app, and the two tasks that run `pipeline.engine.solve.solve_chunk` and
`pipeline.contract.generate.generate_result`.

Thin on purpose: solving lives in `solvers`, the task and result contract in `pipeline`,
and the worker only moves a chunk from a task message to the job store (`tasks`), beats
and requeues orphaned messages (`heartbeat`), and survives a full Redis (`broker`).
"""
