"""What travels between client and workers: tasks and their bounds, outbox entries, the Redis
key layout, runs, result columns and their wire form, and a published part. Imports nothing
of the engine.
"""
