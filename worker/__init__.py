"""The Celery adapter: settings, the app, and three tasks: solve a chunk (`pipeline.engine.runner.run_chunk`),
generate one (`pipeline.contract.generate.generate_result`), help race a puzzle (`worker.race`).

Thin on purpose: solving lives in `solvers`, the task and result contract and its engine in
`pipeline`, and the worker only moves a task from its message to the job store (`tasks`), beats
and requeues orphaned messages (`heartbeat`), and survives a full Redis (`broker`).
"""
