"""`sudoku-batch serve`: build the backend (its processes forked first, from the main thread), then serve;
every way out (a signal, an error) kills the local processes and closes the broker connection in `finally`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import socket
import sys
from collections.abc import Callable

from pydantic import ValidationError

from client.config import ClientSettings, mask_url
from client.interrupts import interrupting
from client.serve_args import TOKEN_ENV
from web.settings import ServeSettings

SHUTDOWN_GRACE_S = 3  # seconds open requests get to finish once the server is told to stop
# the options named otherwise than the settings field they set (`--field-name`), for errors
FLAGS = {"token": f"--token (or {TOKEN_ENV})", "max_upload_bytes": "--max-upload-mb"}


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The server's settings from the command line (ValueError naming the field that is out of range)."""
    token = args.token or os.environ.get(TOKEN_ENV) or None
    upload = args.max_upload_mb * (1 << 20)
    try:
        return ServeSettings(
            host=args.host,
            port=args.port,
            token=token,
            max_time_limit=args.max_time_limit,
            max_upload_bytes=int(upload) if math.isfinite(upload) else 0,
            max_jobs_kept=args.max_jobs_kept,
            max_memory_mb=args.max_memory_mb,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        flag = FLAGS.get(field, f"--{field.replace('_', '-')}" if field else "")
        reason = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"{flag} {reason}".strip()) from None


def run_serve(args: argparse.Namespace, url: str | None, settings: ClientSettings) -> int:
    """Serve until a signal; the exit code (the CLI re-raises the signal's interrupt after the shutdown)."""
    import uvicorn

    from client.batch import BatchClient
    from client.pool import WarmPool
    from web.app import create_app
    from web.backend import Backend

    config = serve_settings(args)
    sock = bind(config.host, config.port)  # first: a port in use is one line, before anything starts
    client = BatchClient(url, workers=args.workers, settings=settings, daemon=True)
    pool = backend = None
    try:
        if client.embedded:
            client.pool.start()  # now, from the main thread: no job ever forks from a server thread
        pool = WarmPool(config.solve_processes).fork()  # from the main thread: they die with the server
        backend = Backend(client, pool, config)
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(backend),
                host=config.host,
                port=config.port,
                log_level="warning",
                lifespan="off",
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                access_log=False,  # a query may carry the token
            )
        )
        stopping = lambda: server.should_exit or interrupting()  # noqa: E731 - SIGHUP is not uvicorn's
        logging.getLogger("uvicorn.error").addFilter(ShutdownNoise(stopping))
        where = f"broker {mask_url(url)}" if url else "embedded (local processes)"
        shown = f"[{config.host}]" if ":" in config.host else config.host
        address = f"http://{shown}:{sock.getsockname()[1]}/"
        print(f"serving {where} on {address}", file=sys.stderr, flush=True)
        if config.token is not None:
            print(f"open {address}?token=TOKEN once; the browser keeps it", file=sys.stderr, flush=True)
        server.run(sockets=[sock])
        return 0
    finally:
        sock.close()
        if backend is not None:
            backend.close()
        else:
            if pool is not None:
                pool.kill()
            client.kill()
            client.close()


class ShutdownNoise(logging.Filter):
    """Keep out of the log what uvicorn says of requests a shutdown cuts off: their tasks' CancelledError
    tracebacks (68 lines each) and the count of them. The command's one line (`interrupted (SIGTERM),
    exit 143`) says why the server stopped; the clients see their connection close."""

    def __init__(self, stopping: Callable[[], bool]) -> None:
        super().__init__()
        self.stopping = stopping

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.stopping():
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, asyncio.CancelledError):
            return False
        return not record.getMessage().endswith("timeout graceful shutdown exceeded")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free one); ValueError in one line when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock
