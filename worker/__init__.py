"""The Celery adapter: settings, the app, and the one task that runs `solvers.chunk.solve_chunk`.

Thin on purpose: everything about solving lives in `solvers`, and the worker only moves
a chunk from a task message to the job store.
"""
