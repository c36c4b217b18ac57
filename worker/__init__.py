"""The Celery adapter: the tasks (solve, generate, escalation help) hand each message to
`pipeline.engine.runner.execute`; thin on purpose, as solving and the task contract live in `solvers` and
`pipeline` (docs/architecture.md)."""
