"""Where one chunk's run meets its job (`run_chunk`'s `port`): Redis for workers, the client's memory for
local processes, a list for one puzzle; the dataset's port wraps any of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pipeline.contract.part import Part

if TYPE_CHECKING:
    from pipeline.contract.generate import GenerateResult


class ChunkPort(Protocol):
    """Where one chunk's run meets its job."""

    def count_delivery(self, job: str, chunk: int) -> int | None:
        """Count one more delivery of the chunk; its count, or None when the job is stopped or gone."""

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        """(first row, rows) of every part published for the chunk; None once the chunk is complete."""

    def publish(self, part: Part) -> bool:
        """Publish a part; False (not written) when any of its rows is answered already or the job stopped."""

    def stopped(self, job: str) -> bool:
        """True once the job was stopped (purged): its solvers give up."""

    def fail_job(self, job: str, reason: str) -> None:
        """End the job failed with `reason` (one line): this process cannot run its chunks (its storage)."""

    def publish_generated(self, result: GenerateResult) -> None:
        """Publish a generate chunk's result (a failure answer never replaces a stored one)."""

    def settle(self, job: str) -> None:
        """Charge the job what this run spent that no published part or result carried (the run's end)."""

    # A port that charges its job keeps a `pipeline.engine.gather.Meter`, made with the port (one port a run),
    # and charges each part it publishes with what the run spent since its last charge.
    # A port may also have `arena` (`pipeline.engine.render.Arena`): where its parts' records are rendered.
