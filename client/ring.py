"""Shared memory between the command and its local processes: a process renders a part's records into its ring
(`RingArena`) and pipes only the header and where they lie; the command reads them there (`RingReader.part`)
and moves a shared `released` counter over the oldest parts dropped (not six copies through the pipe:
docs/decisions.md). A part that does not fit goes through the pipe: nobody waits for the ring."""

from __future__ import annotations

import mmap
import threading
import weakref
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pipeline.contract.part import Part

RING_MB = 16  # the least per local process: two full 9x9 chunks of records (a 1 MB chunk renders ~5.5 MB)
RINGS_MB = 64  # shared among the processes: what may be in flight while the command writes (RSS it may cost)


def ring_bytes(processes: int) -> int:
    """Each ring's size for `processes` local processes: an even share of RINGS_MB, at least RING_MB."""
    return max(RING_MB, RINGS_MB // max(1, processes)) << 20


_HEADER = 64  # bytes before the ring: the command's `released` counter, alone on its cache line


class Ring:
    """A ring buffer in anonymous shared memory (inherited by processes forked after it is made)."""

    def __init__(self, capacity: int = RING_MB << 20) -> None:
        self.capacity = capacity
        self._memory = mmap.mmap(-1, _HEADER + capacity)  # MAP_SHARED | MAP_ANONYMOUS
        self.data = np.frombuffer(self._memory, dtype=np.uint8, count=capacity, offset=_HEADER)
        self.released = np.frombuffer(self._memory, dtype=np.uint64, count=1)  # written by the command only


class RingArena:
    """The process side: parts' records are rendered into the ring (`pipeline.engine.render.Arena`)."""

    def __init__(self, ring: Ring, slot: int) -> None:
        self.ring = ring
        self.slot = slot
        self.head = 0  # bytes ever taken (the padding skipped at the end of the ring included)
        self._start = 0
        self._last: tuple[int, int, int] | None = None  # (address, start, used) of the last records

    def take(self, size: int) -> np.ndarray | None:
        """`size` bytes after the head (at the ring's start when they would run past its end), or None
        when the command has not released enough yet."""
        cap = self.ring.capacity
        at = self.head % cap
        pad = cap - at if at + size > cap else 0
        if size > cap or self.head + pad + size - int(self.ring.released[0]) > cap:
            return None
        self._start = self.head + pad
        offset = self._start % cap
        return self.ring.data[offset : offset + size]

    def done(self, buffer: np.ndarray, used: int) -> None:
        self.head = self._start + used
        self._last = (buffer.ctypes.data, self._start, used)

    def locate(self, body: object) -> tuple[int, int] | None:
        """(start, bytes) of a part's records when they are the last ones rendered here, else None."""
        if self._last is None or not isinstance(body, memoryview):
            return None
        address, start, used = self._last
        view = np.frombuffer(body, dtype=np.uint8)
        return (start, used) if view.size == used and (used == 0 or view.ctypes.data == address) else None


class RingReader:
    """The command side of one process's ring: its parts' records read in place, released when dropped."""

    def __init__(self, ring: Ring) -> None:
        self.ring = ring
        self._lock = threading.Lock()
        self._order: deque[int] = deque()  # starts of the parts not released yet, oldest first
        self._ends: dict[int, int] = {}
        self._gone: set[int] = set()

    def part(self, head: bytes, start: int, used: int) -> Part:
        """The part whose header is `head` and records lie at `start`; its bytes go back to the process
        when the part (and every view of its records) is dropped."""
        from pipeline.contract.part import Part

        offset = start % self.ring.capacity
        records = self.ring.data[offset : offset + used]  # a view of its own: its finalizer frees the bytes
        with self._lock:
            self._order.append(start)
            self._ends[start] = start + used
        weakref.finalize(records, self._release, start)
        return Part.with_head(head, memoryview(records))

    def _release(self, start: int) -> None:
        with self._lock:
            self._gone.add(start)
            released = None
            while self._order and self._order[0] in self._gone:
                first = self._order.popleft()
                self._gone.discard(first)
                released = self._ends.pop(first)
            if released is not None:
                self.ring.released[0] = released
