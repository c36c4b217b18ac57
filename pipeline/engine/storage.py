"""Where a job's inputs are read in splits and its dataset parts written: a local path through the operating
system (fsync'd, renamed into place), or any other URL through `fsspec`. Every backend error leaves as an
OSError (a `StorageError` names the path), so one `except OSError` sees them all; no bucket is ever created.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import inspect
import io
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any, Protocol, TypeVar

T = TypeVar("T")

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class StorageError(OSError):
    """Storage could not be reached, read or written (the message names the path and the reason)."""


@contextlib.contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Any OSError inside as a StorageError of one line: `what` (the operation and its path), the reason."""
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(f"{what}: {reason(exc)}") from None


def is_url(text: str) -> bool:
    """True when `text` is a URL (`scheme://...`) rather than a local path."""
    return bool(URL.match(text))


def local_path(text: str) -> str | None:
    """The local path `text` names (a plain path, or a `file://` URL), or None for another URL."""
    if text.startswith("file://"):
        return text[len("file://") :]
    return None if is_url(text) else text


def absolute(text: str) -> str:
    """A location the workers can use as it is: a local path made absolute (a trailing slash kept)."""
    path = local_path(text)
    if path is None:
        return text
    full = os.path.abspath(os.path.expanduser(path))
    return full + "/" if text.endswith("/") and not full.endswith("/") else full


@dataclass(frozen=True)
class Stat:
    """What tells one version of a file from another: its size and `stamp` (mtime ns, version id or ETag)."""

    size: int
    stamp: str


class Storage(Protocol):
    """The few operations the pipeline needs on one filesystem; paths are full paths or URLs."""

    def stat(self, path: str) -> Stat:
        """Size and stamp of a file (FileNotFoundError, or StorageError when it cannot be read)."""

    def size(self, path: str) -> int:
        """Bytes of a file."""
        return self.stat(path).size

    def open_read(self, path: str) -> IO[bytes]:
        """A seekable binary stream of a file."""

    def put(self, path: str, data: bytes | list[bytes]) -> None:
        """Write a whole file (`data`, or its pieces in order), durably (fsync'd on a filesystem), replacing
        any file there at once (a reader sees the old file or the new one, never a part)."""

    def create(self, path: str, data: bytes) -> bool:
        """Write a whole file only where none is: False (nothing written) when one is there. Exclusive on a
        filesystem (a hard link, NFS too) and S3 (a conditional PUT); elsewhere a check then a write."""

    def rename(self, src: str, dst: str) -> None:
        """Move a file into place, replacing `dst` (atomic on a filesystem)."""

    def exists(self, path: str) -> bool:
        """True when a file or directory is there."""

    def listdir(self, path: str) -> list[str]:
        """The names (not paths) in a directory; [] when there is none."""

    def remove(self, path: str) -> None:
        """Delete a file; nothing when it is not there."""

    def remove_tree(self, path: str) -> None:
        """Delete a directory and what it holds; nothing when it is not there."""

    def makedirs(self, path: str) -> None:
        """Create a directory and its parents (nothing on an object store: prefixes need none)."""

    def join(self, base: str, *names: str) -> str:
        """`base/name/...` (one slash between)."""
        return "/".join([base.rstrip("/"), *names])

    def read(self, path: str) -> bytes:
        """A whole file's bytes."""
        with self.open_read(path) as f:
            return f.read()


class LocalStorage(Storage):
    """A local or shared filesystem, through the operating system."""

    def stat(self, path: str) -> Stat:
        st = os.stat(_plain(path))
        return Stat(st.st_size, str(st.st_mtime_ns))

    def open_read(self, path: str) -> IO[bytes]:
        return open(_plain(path), "rb")  # noqa: SIM115 - the caller closes it

    def put(self, path: str, data: bytes | list[bytes]) -> None:
        with _written_beside(_plain(path), data) as temp:
            os.replace(temp, _plain(path))

    def create(self, path: str, data: bytes) -> bool:
        with _written_beside(_plain(path), data) as temp:
            try:
                os.link(temp, _plain(path))  # exclusive, and the file appears whole (O_EXCL showed it empty)
            except FileExistsError:
                return False
        return True

    def rename(self, src: str, dst: str) -> None:
        os.replace(_plain(src), _plain(dst))
        with contextlib.suppress(OSError):  # the rename itself made durable (a filesystem that allows it)
            fd = os.open(os.path.dirname(_plain(dst)) or ".", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def exists(self, path: str) -> bool:
        return os.path.exists(_plain(path))

    def listdir(self, path: str) -> list[str]:
        try:
            return os.listdir(_plain(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(_plain(path))

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(_plain(path), ignore_errors=True)

    def makedirs(self, path: str) -> None:
        os.makedirs(_plain(path), exist_ok=True)


TEMP_PREFIX = "_tmp."  # a file being written beside its place (readers skip `_` names)


@contextlib.contextmanager
def _written_beside(path: str, data: bytes | list[bytes]) -> Iterator[str]:
    """A temporary file beside `path` holding `data` (fsync'd), deleted on leaving: moved or linked into place
    meanwhile, so no reader sees it half written."""
    head, name = os.path.split(path)
    temp = os.path.join(head, f"{TEMP_PREFIX}{name}.{os.getpid()}.{os.urandom(4).hex()}")
    _write(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), temp, data)
    try:
        yield temp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp)


def _write(fd: int, path: str, data: bytes | list[bytes]) -> None:
    """Write `data` to the open file `fd` and fsync it; a file left half written (a full disk) is deleted."""
    try:
        for piece in data if isinstance(data, list) else [data]:
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(path)
        raise
    finally:
        os.close(fd)


def _plain(path: str) -> str:
    local = local_path(path)
    if local is None:
        raise StorageError(f"{path}: not a local path")
    return local


class FsspecStorage(Storage):
    """A filesystem fsspec knows by the URL's protocol (`s3://`: s3fs, `gs://`: gcsfs, ...)."""

    STAMPS = ("VersionId", "ETag", "etag", "generation", "md5Hash", "mtime", "LastModified", "last_modified")

    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def _path(self, url: str) -> str:
        return self.fs._strip_protocol(url)

    def _call(self, url: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(*args, **kwargs)` with the backend's errors (botocore's, aiohttp's...) as OSError."""
        try:
            return call(*args, **kwargs)
        except (FileNotFoundError, FileExistsError):
            raise
        except Exception as exc:  # noqa: BLE001 - every backend error becomes one line naming the path
            raise StorageError(f"{url}: {reason(exc)}") from exc

    def _bucket(self, url: str) -> str | None:
        """The bucket (container) `url` lies in, on an object store (s3fs, gcsfs, adlfs); None elsewhere."""
        split = getattr(self.fs, "split_path", None)
        return str(split(self._path(url))[0]) if callable(split) else None

    def _written(self, url: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A write: on an object store, "not found" can only mean a missing bucket, named (never created)."""
        try:
            return self._call(url, call, *args, **kwargs)
        except FileNotFoundError:
            bucket = self._bucket(url)
            if bucket is None:
                raise
            raise StorageError(
                f"{url}: the bucket {bucket} does not exist (sudoku-batch creates no bucket: create it, "
                "or name another)"
            ) from None

    def stat(self, path: str) -> Stat:
        p = self._path(path)
        self.fs.invalidate_cache(p)
        info = self._call(path, self.fs.info, p)
        stamp = next((str(info[k]) for k in self.STAMPS if info.get(k) not in (None, "")), "")
        if len(stamp) > 64:  # a backend's long version token: its digest is as telling, and bounded
            stamp = hashlib.sha256(stamp.encode()).hexdigest()
        return Stat(int(info["size"]), stamp)

    def open_read(self, path: str) -> IO[bytes]:
        return _Guarded(self, path, self._call(path, self.fs.open, self._path(path), "rb"))  # type: ignore[return-value]

    def put(self, path: str, data: bytes | list[bytes]) -> None:
        self._written(
            path, self.fs.pipe_file, self._path(path), b"".join(data) if isinstance(data, list) else data
        )

    def create(self, path: str, data: bytes) -> bool:
        p = self._path(path)
        try:
            if "mode" in inspect.signature(self.fs.pipe_file).parameters:  # fsspec's exclusive write
                try:
                    self._written(path, self.fs.pipe_file, p, data, mode="create")
                    return True
                except StorageError as exc:
                    if not _unsupported(exc.__cause__):
                        raise
            self.fs.invalidate_cache(p)  # a backend without conditional writes: a check, then the write
            if self._call(path, self.fs.exists, p):
                return False
            self._written(path, self.fs.pipe_file, p, data)
            return True
        except FileExistsError:
            return False

    def rename(self, src: str, dst: str) -> None:
        self._call(dst, self.fs.mv, self._path(src), self._path(dst))

    def exists(self, path: str) -> bool:
        self.fs.invalidate_cache(self._path(path))
        return bool(self._call(path, self.fs.exists, self._path(path)))

    def listdir(self, path: str) -> list[str]:
        base = self._path(path).rstrip("/")
        self.fs.invalidate_cache(base)
        try:
            found = self._call(path, self.fs.ls, base, detail=False)
        except FileNotFoundError:
            return []
        return [str(p).rstrip("/").rsplit("/", 1)[-1] for p in found if str(p).rstrip("/") != base]

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._call(path, self.fs.rm_file, self._path(path))

    def remove_tree(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._call(path, self.fs.rm, self._path(path), recursive=True)

    def makedirs(self, path: str) -> None:
        if self._bucket(path) is not None:
            return  # an object store: a prefix needs no directory (and fsspec's makedirs creates buckets)
        with contextlib.suppress(FileExistsError):
            self._call(path, self.fs.makedirs, self._path(path), exist_ok=True)


def _unsupported(exc: BaseException | None) -> bool:
    """True for a store's "not implemented" answer (HTTP 501, no conditional writes: s3fs's ENOSYS)."""
    return isinstance(exc, NotImplementedError) or (isinstance(exc, OSError) and exc.errno == errno.ENOSYS)


class _Guarded(io.RawIOBase):
    """A backend's open file whose reads and seeks raise OSError only (`FsspecStorage._call`)."""

    def __init__(self, storage: FsspecStorage, url: str, file: Any) -> None:
        super().__init__()
        self.storage, self.url, self.file = storage, url, file

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return bytes(self.storage._call(self.url, self.file.read, size))

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self.storage._call(self.url, self.file.seek, offset, whence))

    def tell(self) -> int:
        return int(self.file.tell())

    def close(self) -> None:
        if not self.closed:
            try:
                self.storage._call(self.url, self.file.close)
            finally:
                super().close()


@lru_cache(maxsize=16)
def storage_for(location: str) -> Storage:
    """The storage holding `location` (a path, `file://`, or a URL of an installed fsspec backend);
    StorageError when no backend handles it."""
    if local_path(location) is not None:
        return LocalStorage()
    import fsspec

    protocol = location.split("://", 1)[0]
    try:
        fs = fsspec.filesystem(protocol)
    except (ImportError, ValueError) as exc:
        raise StorageError(
            f"{location}: no fsspec backend for {protocol}:// ({_reason(exc)}; e.g. pip install s3fs, "
            "gcsfs or adlfs)"
        ) from None
    return FsspecStorage(fs)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def reason(exc: BaseException) -> str:
    """An exception as one short line for a user (its type and first line; a StorageError's line as it is)."""
    return _reason(exc) if isinstance(exc, StorageError) else f"{type(exc).__name__}: {_reason(exc)}"
