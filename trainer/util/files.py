"""File helpers every trainer write uses: SHA-256 digests and atomic, durable writes.

Importable without torch (the data cache uses it too)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from trainer.errors import BundleError

__all__ = ["atomic_write_bytes", "sha256_bytes", "sha256_file"]


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 digest of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 digest of a file's bytes, read in 1 MiB chunks.

    Raises:
        BundleError: the file cannot be read (``file`` names it).
    """
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read ({exc.strerror or exc})", file=str(path)) from exc
    return h.hexdigest()


def atomic_write_bytes(path: str | Path, data: bytes) -> str:
    """Write ``data`` to ``path`` atomically and durably; return its hex SHA-256.

    The bytes go to a temporary file in the same folder (same file system, so the rename is
    atomic), are flushed and fsynced, and the file is renamed over ``path`` with
    ``os.replace``; the folder is fsynced too where the OS allows it. Readers see either the
    old file or the complete new one. Missing parent folders are created.

    Raises:
        BundleError: the folder cannot be created or written (``file`` names ``path``).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise BundleError(f"{path}: cannot write here ({exc.strerror or exc})", file=str(path)) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise BundleError(f"{path}: cannot write ({exc.strerror or exc})", file=str(path)) from exc
        raise
    with contextlib.suppress(OSError):  # not possible on every platform (e.g. Windows)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return sha256_bytes(data)
