"""What travels between client and workers: tasks and their bounds, outbox entries, the Redis key layout,
runs, the wire form of result columns, and a published part. Imports nothing of the engine."""
