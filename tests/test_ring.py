"""Parts of local processes come back through shared memory: read in place, released when dropped."""

from __future__ import annotations

import gc
import json
import os

import numpy as np

from client import BatchClient
from client.output import Output
from client.ring import RING_MB, RINGS_MB, Ring, RingArena, RingReader, ring_bytes
from pipeline.contract.runs import runs_array
from pipeline.contract.tasks import ChunkTask
from pipeline.engine.memory import frozen, reuse_freed_memory
from pipeline.engine.solve import build_part
from solvers.api import solve_many
from tests.conftest import SAMPLE, chunk_task

LINES = SAMPLE.read_text().splitlines()


def parts_of(task: ChunkTask, *arenas: RingArena | None) -> list:
    """The task's answers as one part, rendered once into each of `arenas` (None: a fresh buffer)."""
    from solvers.model.columns import ResultColumns

    texts = task.texts()
    columns = ResultColumns.build(texts, solve_many(texts))
    index, lines = runs_array(task.index_runs), runs_array(task.line_runs)
    return [
        build_part(task.job, task.chunk, 0, len(task), task.input, index, lines, columns, "jsonl", arena)
        for arena in arenas
    ]


def test_a_part_rendered_into_the_ring_is_read_in_place_and_released_when_dropped():
    ring = Ring(1 << 20)
    arena, reader = RingArena(ring, 0), RingReader(ring)
    task = chunk_task("ab" * 16, LINES[:50], format="jsonl")
    plain, part = parts_of(task, None, arena)
    where = arena.locate(part.body)
    assert where is not None and where[0] == 0 and where[1] == len(part.body) == len(plain.body)
    back = reader.part(part.encode_head(), *where)
    assert bytes(back.body) == bytes(plain.body) and back.header.index_runs == plain.header.index_runs
    assert int(ring.released[0]) == 0  # still held: the output has not written it
    del back
    assert int(ring.released[0]) == where[1]
    assert arena.locate(plain.body) is None  # a part rendered elsewhere goes through the pipe


def test_the_ring_is_released_over_the_oldest_parts_only_and_never_overwritten_while_held():
    ring = Ring(4096)
    arena, reader = RingArena(ring, 0), RingReader(ring)
    held = []
    for _ in range(3):
        buf = arena.take(1000)
        assert buf is not None
        buf[:] = len(held)
        arena.done(buf, 1000)
        held.append(reader.part(_head(), *arena.locate(memoryview(buf[:1000]))))
    assert arena.take(1500) is None  # 1096 bytes free at the end, and nothing released: the pipe instead
    held.pop(1)  # the middle part goes first: the oldest still holds the ring
    assert int(ring.released[0]) == 0 and arena.take(1500) is None
    held.pop(0)
    assert int(ring.released[0]) == 2000
    buf = arena.take(1500)  # wraps to the ring's start, over the two parts released
    assert buf is not None and buf.ctypes.data == ring.data.ctypes.data
    assert bytes(held[0].body) == bytes([2]) * 1000  # the part still held is untouched


def _head() -> bytes:
    from pipeline.contract.part import PartHeader, PartStats

    header = PartHeader(
        job="ab" * 16,
        chunk=0,
        input="x",
        format="jsonl",
        index_runs=[(0, 1)],
        line_runs=[(1, 1)],
        stats=PartStats(n=1),
    )
    return header.model_dump_json().encode() + b"\n"


def test_an_embedded_solve_moves_its_records_through_the_rings_of_its_processes(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES * 4) + "\n")  # over the in-process size: the pool runs it
    out = tmp_path / "out.jsonl"
    with BatchClient(workers=2) as client:
        job = client.submit(str(path), format="jsonl")
        output = Output(str(out), "jsonl")
        for result, start, stop in job.chunks(keep=False):
            output.write(result, start, stop)
        output.close(True)
        del result  # the last part read: its records go back to its process's ring now
        moved = sum(int(reader.ring.released[0]) for reader in client.pool._readers)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(4 * len(LINES)))
    assert moved == out.stat().st_size  # every record came through shared memory, and was given back


def test_forked_children_keep_the_warm_objects_frozen_and_the_parent_collects_again():
    assert reuse_freed_memory()
    read, write = os.pipe()
    with frozen():
        child = os.fork()
        if child == 0:
            os.write(write, str(gc.get_freeze_count()).encode())
            os._exit(0)
    os.waitpid(child, 0)
    assert int(os.read(read, 32)) > 1000 and gc.get_freeze_count() == 0
    assert np.zeros(1).size  # still a working process


def test_the_processes_share_the_ring_budget_evenly_and_each_ring_holds_two_full_chunks_at_least():
    assert ring_bytes(2) == (RINGS_MB // 2) << 20 == 32 << 20  # every part of a 1M kaggle run fits
    assert ring_bytes(64) == RING_MB << 20 and ring_bytes(0) == RINGS_MB << 20
