"""The Celery adapter: settings, the app, and the three tasks (solve, generate, escalation help) that hand
each message to `pipeline.engine.runner.execute`.

Thin on purpose: solving lives in `solvers`, the task and result contract and its engine in
`pipeline`, and the worker only moves a task from a message (`tasks`) to the job store (`board`), beats
and requeues orphaned messages (`heartbeat`), and survives a full Redis (`broker`).
"""
