"""The `serve` command's options: part of the command line's grammar, so `sudoku-batch` builds its parser
without loading the web package (`web.server` reads them when `serve` runs)."""

from __future__ import annotations

from client.args import Option

TOKEN_ENV = "SUDOKU_BATCH_TOKEN"


OPTIONS: list[Option] = [  # the `serve` options
    (
        ("--broker",),
        dict(
            metavar="URL",
            help="read and submit jobs on this broker (default: SUDOKU_BATCH_BROKER; none: local processes)",
        ),
    ),
    (("--host",), dict(default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")),
    (("--port",), dict(type=int, default=8000, help="port to listen on (default: 8000; 0: a free one)")),
    (
        ("--token",),
        dict(help=f"every request must carry it; required off loopback (default: {TOKEN_ENV}, else none)"),
    ),
    (
        ("--max-time-limit",),
        dict(
            type=float,
            default=60.0,
            metavar="S",
            help="most seconds per puzzle a request may ask, single puzzles and uploads (default: 60)",
        ),
    ),
    (
        ("--max-upload-mb",),
        dict(type=float, default=32.0, metavar="MB", help="largest corpus upload, unpacked (default: 32)"),
    ),
    (("--workers",), dict(type=int, metavar="N", help="processes for jobs (default: one per core)")),
    (
        ("--max-jobs-kept",),
        dict(
            type=int,
            default=50,
            metavar="N",
            help="embedded: jobs kept in memory, past it the oldest finished go (default: 50)",
        ),
    ),
    (
        ("--max-memory-mb",),
        dict(
            type=int,
            default=1024,
            metavar="MB",
            help="embedded: the server's resident memory past which the oldest finished jobs go "
            "(default: 1024)",
        ),
    ),
]
