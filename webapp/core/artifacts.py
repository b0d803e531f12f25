"""Reading artifacts from the default storage whatever it is (a local folder or an S3-compatible
bucket): byte ranges, local copies checked against their SHA-256, and a local path for
libraries that need a file (onnxruntime).

Writes need nothing here: a worker's trainer writes to a local temporary file and the worker
saves it with ``default_storage.save`` before the name is recorded in the database. A local
folder's save goes through a temporary file renamed into place; an S3 ``PutObject`` (or a
multipart upload's completion) makes the object visible whole or not at all. Either way a name
in the database points at a complete file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.files.storage import Storage, default_storage

from webapp.core.errors import AppError

CHUNK_BYTES = 1 << 20


def _bucket_and_key(storage: Storage, name: str) -> tuple[Any, str, str] | None:
    """``(client, bucket, key)`` when ``storage`` is django-storages' S3 backend, else ``None``."""
    try:
        from storages.backends.s3 import S3Storage
        from storages.utils import clean_name
    except ImportError:  # boto3/django-storages not installed: only local folders are possible
        return None
    if not isinstance(storage, S3Storage):
        return None
    # the backend's own name mapping (location prefix, path clean-up), as its _open uses
    key = storage._normalize_name(clean_name(name))
    return storage.connection.meta.client, storage.bucket_name, key


def is_remote(storage: Storage) -> bool:
    """Whether ``storage`` is a bucket (no local path to its files)."""
    return _bucket_and_key(storage, "x") is not None


def etag(name: str, storage: Storage) -> str:
    """The bucket's ETag of ``name`` (a new one for every upload under that name): one ``HeadObject``.

    Raises:
        ValueError: ``storage`` is not a bucket.
    """
    s3 = _bucket_and_key(storage, name)
    if s3 is None:
        raise ValueError("etag: not a bucket storage")
    client, bucket, key = s3
    return client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')


def read_range(name: str, start: int, length: int, *, storage: Storage | None = None) -> Iterator[bytes]:
    """Yield ``length`` bytes of the stored file ``name`` from byte ``start``, in chunks of at
    most 1 MiB.

    From S3 this is one ranged ``GetObject`` (``Range: bytes=start-end``, RFC 9110 sec. 14.1.2)
    streamed as it arrives, so a resumed download of a large bundle neither fetches nor holds
    the part the client already has. From a local folder it is a seek and reads.
    """
    storage = storage or default_storage
    if length <= 0:
        return
    s3 = _bucket_and_key(storage, name)
    if s3 is not None:
        client, bucket, key = s3
        body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")["Body"]
        try:
            yield from body.iter_chunks(CHUNK_BYTES)
        finally:
            body.close()
        return
    with storage.open(name, "rb") as fh:
        fh.seek(start)
        while length > 0:
            data = fh.read(min(CHUNK_BYTES, length))
            if not data:
                break
            length -= len(data)
            yield data


def _chunks(name: str, storage: Storage) -> Iterator[bytes]:
    s3 = _bucket_and_key(storage, name)
    if s3 is not None:
        client, bucket, key = s3
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        try:
            yield from body.iter_chunks(CHUNK_BYTES)
        finally:
            body.close()
        return
    with storage.open(name, "rb") as fh:
        yield from iter(lambda: fh.read(CHUNK_BYTES), b"")


def local_copy(name: str, dest: Path, *, expected_sha256: str | None = None, storage: Storage | None = None) -> Path:
    """Copy the stored file ``name`` to the local file ``dest``, streamed (bounded memory).

    The bytes go to ``dest`` plus a ``.part`` suffix first and are renamed into place only once
    complete and, when ``expected_sha256`` is given, once their SHA-256 matches it: ``dest``
    never holds a partial or corrupt copy.

    Args:
        name: storage name (e.g. ``runs/3/gen-12-a1.pt``).
        dest: the local file to write (its folder must exist).
        expected_sha256: hex digest recorded when the file was stored (``Agent.sha256``).
        storage: defaults to the default storage.

    Returns:
        ``dest``.

    Raises:
        AppError: the copy's SHA-256 differs from ``expected_sha256`` (naming the file).
        FileNotFoundError: no such stored file (local folder); botocore's ``ClientError`` for
            a missing object in a bucket.
    """
    storage = storage or default_storage
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.sha256()
    try:
        with open(part, "wb") as out:
            for chunk in _chunks(name, storage):
                digest.update(chunk)
                out.write(chunk)
        got = digest.hexdigest()
        if expected_sha256 and got != expected_sha256.lower():
            raise AppError(
                f"stored file {name} is corrupt: its SHA-256 is {got}, the one recorded is {expected_sha256}",
                details={"name": name, "sha256": got, "expected_sha256": expected_sha256},
            )
        os.replace(part, dest)
    finally:
        part.unlink(missing_ok=True)
    return dest


def local_path(name: str, *, sha256: str, cache_dir: Path, storage: Storage | None = None) -> Path:
    """A local file holding the stored file ``name`` whose SHA-256 is ``sha256``.

    A local folder's own path; for a bucket, a copy kept in ``cache_dir/artifacts`` under its
    digest (checked on download), fetched once per machine.

    Raises:
        AppError: the downloaded copy does not match ``sha256``.
    """
    storage = storage or default_storage
    if _bucket_and_key(storage, name) is None:
        return Path(storage.path(name))
    folder = Path(cache_dir) / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    cached = folder / f"{sha256}{Path(name).suffix}"
    if not cached.exists():
        local_copy(name, cached, expected_sha256=sha256, storage=storage)
    return cached
