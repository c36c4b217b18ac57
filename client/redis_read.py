"""One large value (a chunk result: megabytes) read from Redis straight into one buffer, past redis-py's reply
parser (`read_large`, for `RedisJobStore.fetch`)."""

from __future__ import annotations

import logging
import socket
from typing import Any

import redis

try:  # redis-py's own reply buffer (a private module): without it `read_large` takes the plain path
    from redis._parsers.socket import SocketBuffer
except ImportError:  # pragma: no cover - another redis-py layout
    SocketBuffer = None  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)


def read_large(client: Any, key: str) -> bytes | bytearray | None:
    """GET one large value straight from the socket into one bytearray (redis-py's parser copies it four
    times: docs/decisions.md); NotImplemented when it cannot. Any error drops the connection (it may be
    mid-reply) and returns NotImplemented (the caller falls back to GET); an interrupt drops it too before
    going on up, or the pooled connection would hand the rest of this value to the next command."""
    pool = getattr(client, "connection_pool", None)
    if SocketBuffer is None or not isinstance(pool, redis.ConnectionPool):
        return NotImplemented  # a fake or exotic client: the ordinary path
    try:
        conn = pool.get_connection()  # connects: a broker outage goes to the caller's retrying path
    except (redis.RedisError, OSError):
        return NotImplemented
    try:
        conn.send_command("GET", key)
        buffer, sock = getattr(conn._parser, "_buffer", None), getattr(conn, "_sock", None)
        if not isinstance(buffer, SocketBuffer) or not isinstance(sock, socket.socket):
            return conn.read_response()  # another parser (hiredis) or a fake socket: the ordinary read
        head = buffer.readline()
        if head in (b"$-1", b"_"):  # RESP2 / RESP3 null: no such key
            buffer.purge()
            return None
        if head[:1] != b"$":
            raise redis.ResponseError(head[1:].decode("utf-8", "replace"))
        size = int(head[1:]) + 2  # the value and its CRLF
        out = bytearray(size)
        view = memoryview(out)
        got = buffer._buffer.readinto(view)  # what redis-py already buffered past the header
        while got < size:
            n = sock.recv_into(view[got:])
            if n == 0:
                raise redis.ConnectionError("connection closed while reading a result")
            got += n
        buffer.purge()
        view.release()
        del out[-2:]
        return out
    except Exception as exc:  # noqa: BLE001 - any surprise: drop the connection, take the ordinary path
        log.debug("a large read of %s takes the ordinary path: %s", key, exc)
        conn.disconnect()
        return NotImplemented
    except BaseException:  # an interrupt mid-reply: the rest of the value must not answer the next command
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
