"""`sudoku-batch serve`: build the backend (its processes forked first, from the main thread), then serve.

Every way out ends what the command started: uvicorn turns SIGINT and SIGTERM into a
graceful shutdown and raises the signal again afterwards (the CLI then exits 128 + it);
SIGHUP interrupts the loop directly; either way the `finally` here kills the local
processes and closes the broker connection. A SIGKILL leaves nothing either: every local
process holds PR_SET_PDEATHSIG (`client.processes`).
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys

from pydantic import ValidationError

from client.config import ClientSettings, mask_url
from client.serve_args import TOKEN_ENV as TOKEN_ENV  # re-exported: the serve options live in client
from client.serve_args import add_arguments as add_arguments
from web.settings import ServeSettings

SHUTDOWN_GRACE_S = 3  # seconds open requests get to finish once the server is told to stop
FLAGS = {  # settings field -> the option that sets it, for errors
    "host": "--host",
    "port": "--port",
    "token": f"--token (or {TOKEN_ENV})",
    "max_time_limit": "--max-time-limit",
    "max_upload_bytes": "--max-upload-mb",
}


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
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        flag = FLAGS.get(field, "")
        reason = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"{flag} {reason}".strip()) from None


def run_serve(args: argparse.Namespace, url: str | None, settings: ClientSettings) -> int:
    """Serve until a signal; the exit code (the CLI re-raises the signal's interrupt after the shutdown)."""
    import uvicorn

    from client.batch import BatchClient
    from web.app import create_app
    from web.backend import Backend
    from web.pool import PuzzlePool

    config = serve_settings(args)
    sock = bind(config.host, config.port)  # first: a port in use is one line, before anything starts
    client = BatchClient(url, workers=args.workers, settings=settings, daemon=True)
    pool = backend = None
    try:
        if client.embedded:
            client.pool.start()  # now, from the main thread: no job ever forks from a server thread
        pool = PuzzlePool(config.solve_processes)
        backend = Backend(client, pool, config)
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(backend),
                host=config.host,
                port=config.port,
                log_level="warning",
                access_log=False,  # a query may carry the token
                lifespan="off",
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
        )
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
                pool.close()
            client.kill()
            client.close()


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
