"""Between the client and the workers: the contract they share, the engine that runs a task, the fleet race.

`client` and `worker` both import this package and never each other. Three rooms (docs/architecture.md):
`contract/` (what travels: tasks, parts, wire columns, Redis keys; it loads nothing of the other two),
`engine/` (how a task runs where it runs), `escalation/` (one puzzle raced across the fleet).
"""
