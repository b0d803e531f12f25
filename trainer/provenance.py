"""What produced a result, recorded beside it: the code version (the git commit of the
checkout when there is one, else the package version), the versions of the packages whose
numerics matter (torch, numpy), a content hash of the data files and the seed.

Pure standard library + the packages named; no web imports. The git commit is read once per
process; a file's digest is cached by (path, size, mtime), so a worker hashes a data file once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer.util.files import sha256_file
from trainer.version import __version__

_REPO = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``"git:<40 hex>"`` (``+dirty`` when tracked files were changed) for a git checkout,
    else ``"paddock <version>"`` (an installed copy, or git missing)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"paddock {__version__}"
    if len(commit) != 40:
        return f"paddock {__version__}"
    return f"git:{commit}{'+dirty' if dirty else ''}"


def package_versions() -> dict[str, str]:
    """``{"python", "torch", "numpy"}`` versions of this process."""
    import numpy
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__}


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def data_digest(paths: Sequence[str | Path]) -> str:
    """``"sha256:<hex>"`` over the files' own SHA-256 digests in path order (names left out, so
    the same bytes moved elsewhere hash the same).

    Raises:
        trainer.errors.BundleError: a file cannot be read (naming it).
    """
    outer = hashlib.sha256()
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            stat = None
        digest = sha256_file(path) if stat is None else _file_digest(str(path), stat.st_size, stat.st_mtime_ns)
        outer.update(bytes.fromhex(digest))
    return f"sha256:{outer.hexdigest()}"


def provenance(paths: Sequence[str | Path], *, seed: int | None) -> dict[str, Any]:
    """``{"code_version", "packages": {...}, "data_sha256", "seed"}`` for a result trained or
    evaluated on ``paths`` with ``seed`` (JSON-able)."""
    return {
        "code_version": code_version(),
        "packages": package_versions(),
        "data_sha256": data_digest(paths),
        "seed": None if seed is None else int(seed),
    }
