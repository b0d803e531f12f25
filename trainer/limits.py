"""Caps on what one input may expand to (data files, agent bundles, request bodies), checked
while streaming so that a small file that decompresses to gigabytes is refused before the
memory is spent.

The web side builds an :class:`InputLimits` from its settings (``PADDOCK_MAX_FILE_BYTES``,
``PADDOCK_MAX_FILE_ROWS``, ``PADDOCK_MAX_BUNDLE_BYTES``) in ``webapp/engine``; the command line
takes ``--max-file-bytes``, ``--max-file-rows`` and ``--max-bundle-bytes`` and defaults to
:data:`DEFAULT_LIMITS`. See ``docs/limits-trainer.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.errors import ConfigError

MIB = 1024 * 1024

__all__ = ["DEFAULT_LIMITS", "MIB", "InputLimits", "mib"]


def mib(n_bytes: int) -> str:
    """``n_bytes`` as a short figure for messages: ``"256 MiB"``, ``"1.5 MiB"``, ``"900 bytes"``."""
    if n_bytes < MIB:
        return f"{n_bytes:,} bytes"
    value = n_bytes / MIB
    return f"{value:.0f} MiB" if value == int(value) else f"{value:.1f} MiB"


@dataclass(frozen=True)
class InputLimits:
    """How far one input may expand.

    Attributes:
        file_bytes: most bytes one data file may hold once decompressed (a ``.csv.gz``'s CSV
            text; a Parquet file's uncompressed column data). Default 256 MiB: the largest
            shipped file (Nasdaq-100, 252,000 rows) is about 30 MiB of CSV.
        file_rows: most data rows one file may hold. Default 2,000,000 (8 years of 5-minute
            bars of 40 tickers, or 100 years of daily bars of 80 tickers).
        bundle_bytes: most bytes the members of one agent bundle may hold once decompressed,
            all together. Default 256 MiB (an ensemble of ten 3x1024 networks is about 100 MiB).
        request_bytes: most bytes of one HTTP request body of ``trainer serve``. Default
            10 MiB, the web app's ``DATA_UPLOAD_MAX_MEMORY_SIZE``.

    Raises:
        ConfigError: a limit is not a positive integer (``field`` names it).
    """

    file_bytes: int = 256 * MIB
    file_rows: int = 2_000_000
    bundle_bytes: int = 256 * MIB
    request_bytes: int = 10 * MIB

    def __post_init__(self) -> None:
        for name in ("file_bytes", "file_rows", "bundle_bytes", "request_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}: must be a positive whole number, got {value!r}", field=name)


DEFAULT_LIMITS = InputLimits()
"""The limits used where none are given."""
