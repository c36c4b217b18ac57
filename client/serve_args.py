"""The `serve` command's options: part of the command line's grammar, so `sudoku-batch` builds its parser
without loading the web package (`web.server` reads them when `serve` runs)."""

from __future__ import annotations

import argparse

TOKEN_ENV = "SUDOKU_BATCH_TOKEN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `serve` options."""
    p.add_argument(
        "--broker",
        default=None,
        metavar="URL",
        help="read and submit jobs on this broker (default: SUDOKU_BATCH_BROKER; none: local processes)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000; 0: a free one)")
    p.add_argument(
        "--token",
        default=None,
        help=f"every request must carry it; required off loopback (default: {TOKEN_ENV}, else none)",
    )
    p.add_argument(
        "--max-time-limit",
        type=float,
        default=60.0,
        metavar="S",
        help="most seconds per puzzle a request may ask, single puzzles and uploads (default: 60)",
    )
    p.add_argument(
        "--max-upload-mb",
        type=float,
        default=32.0,
        metavar="MB",
        help="largest corpus upload, unpacked (default: 32)",
    )
    p.add_argument(
        "--workers", type=int, default=None, metavar="N", help="processes for jobs (default: one per core)"
    )
    kept = "embedded: jobs kept in memory, past it the oldest finished go (default: 50)"
    p.add_argument("--max-jobs-kept", type=int, default=50, metavar="N", help=kept)
    memory = "embedded: the server's resident memory past which the oldest finished jobs go (default: 1024)"
    p.add_argument("--max-memory-mb", type=int, default=1024, metavar="MB", help=memory)
