"""The job's outbox: every chunk task committed before it is sent, kept until its result is stored.

A solve worker reads its task from here (the message only names it), and the resend sweep
and a resume send tasks of either kind again from here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pipeline.contract.tasks import ChunkTask

if TYPE_CHECKING:
    from pipeline.contract.generate import GenerateTask


def parse_task(text: str | bytes) -> ChunkTask | GenerateTask:
    """Read a task of either kind from its JSON (a ValidationError when it is not a task of its kind); the
    generate model is loaded only when one is met, so a solve client never loads the generator."""
    data = json.loads(text)
    if isinstance(data, dict) and "count" in data and "puzzles" not in data:
        from pipeline.contract.generate import GenerateTask

        return GenerateTask.model_validate(data)
    return ChunkTask.model_validate(data)


_ENTRY_HEAD, _ENTRY_TASK = '{"at":', ',"task":'


def outbox_entry(at: float, task_json: str) -> str:
    """An outbox entry: `{"at": <epoch s>, "task": <the task's JSON object>}`, by concatenation (a task as a
    JSON string, a megabyte escaped again, cost ~3 ms per chunk, concatenating 0.1 ms)."""
    return f"{_ENTRY_HEAD}{at!r}{_ENTRY_TASK}{task_json}}}"


def read_outbox_entry(raw: bytes | str) -> tuple[float, str]:
    """Invert `outbox_entry`: (sent at, task JSON); also reads the older form whose task is a JSON string."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    head = len(_ENTRY_HEAD)
    cut = text.find(_ENTRY_TASK, head, head + 40) if text.startswith(_ENTRY_HEAD) else -1
    if cut > 0 and text.endswith("}"):
        return float(text[len(_ENTRY_HEAD) : cut]), text[cut + len(_ENTRY_TASK) : -1]
    entry = json.loads(text)
    task = entry["task"]
    return float(entry["at"]), task if isinstance(task, str) else json.dumps(task)
