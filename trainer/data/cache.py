"""Parquet cache of processed :class:`MarketData`, keyed by the input files and the spec."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import stockstats

from trainer.data.files import expand_paths
from trainer.data.market import MarketData
from trainer.data.sessions import bar_dates
from trainer.data.spec import DataSpec
from trainer.util.files import atomic_write_bytes

CACHE_FORMAT = 2
"""Bump when the cache layout or any computation changes, so old cache files are ignored."""


def _resolve(spec: DataSpec, data_dir) -> list[Path]:
    paths = []
    for p in spec.paths:
        path = Path(p).expanduser()
        if not path.is_absolute() and data_dir is not None:
            path = Path(data_dir) / path
        paths.append(path)
    return expand_paths(paths)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_key(spec: DataSpec, files: Sequence[Path]) -> str:
    """SHA-256 hex of the files' contents (in order, with their names) and the spec's options.

    The names matter because a per-ticker file takes its ticker from its name; the folder does
    not, so moving the data keeps the cache valid.
    """
    options = spec.to_dict()
    options.pop("paths")
    options.pop("membership", None)  # applied after the cache (load_market_data): one panel, any membership
    payload = {
        "format": CACHE_FORMAT,
        "stockstats": getattr(stockstats, "__version__", "?"),
        "files": [[f.name, _file_digest(f)] for f in files],
        "options": options,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _write_cache(data: MarketData, path: Path, key: str) -> None:
    t, n = data.close.shape
    columns = {
        "date": pa.array(np.repeat(data.dates, n)),
        "tic": pa.array(np.tile(np.asarray(data.tickers, dtype=object), t), pa.string()),
        "close": pa.array(data.close.reshape(-1)),
        "turbulence": pa.array(np.repeat(data.turbulence, n)),
    }
    for f, name in enumerate(data.feature_names):
        columns[f"f:{name}"] = pa.array(np.ascontiguousarray(data.features[:, :, f]).reshape(-1))
    meta = {
        "format": CACHE_FORMAT,
        "key": key,
        "tickers": list(data.tickers),
        "feature_names": list(data.feature_names),
        "notes": list(data.notes),
        "source": data.source,
    }
    table = pa.table(columns).replace_schema_metadata({"paddock": json.dumps(meta)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def _read_cache(path: Path, key: str) -> MarketData | None:
    try:
        table = pq.read_table(path)
        meta = json.loads(table.schema.metadata[b"paddock"])
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None
    if meta.get("format") != CACHE_FORMAT or meta.get("key") != key:
        return None
    n = len(meta["tickers"])
    t = table.num_rows // max(n, 1)
    close = table.column("close").to_numpy().reshape(t, n)
    feats = (
        np.stack([table.column(f"f:{name}").to_numpy().reshape(t, n) for name in meta["feature_names"]], axis=-1)
        if meta["feature_names"]
        else np.zeros((t, n, 0), dtype="float32")
    )
    return MarketData(
        dates=bar_dates(table.column("date").to_numpy()[::n]),
        tickers=tuple(meta["tickers"]),
        close=np.ascontiguousarray(close),
        features=np.ascontiguousarray(feats.astype("float32")),
        feature_names=tuple(meta["feature_names"]),
        turbulence=np.ascontiguousarray(table.column("turbulence").to_numpy()[::n]),
        notes=tuple(meta["notes"]),
        source=meta["source"],
    )


def cache_path(spec: DataSpec, *, data_dir=None, cache_dir) -> Path:
    """Where :func:`load_market_data` keeps the Parquet cache of ``spec``.

    Raises:
        DataError: a data file does not exist.
    """
    files = _resolve(spec, data_dir)
    return Path(cache_dir) / f"market-{cache_key(spec, files)[:32]}.parquet"
