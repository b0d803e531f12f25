"""Writes of the market app: datasets from files in the data folder or from an upload."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from webapp import engine
from webapp.core.errors import AppError
from webapp.market.models import Dataset, upload_local_path

ALLOWED_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")


def _check_name(owner, name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise AppError("name: required", fields={"name": "required"})
    if Dataset.objects.filter(owner=owner, name=name).exists():
        raise AppError(f"name: you already have a dataset named {name!r}", fields={"name": "already used"})
    return name


def _relative_data_path(raw: str, index: int) -> str:
    """Check that ``raw`` names a file inside ``PADDOCK_DATA_DIR`` and return it normalized."""
    field = f"paths.{index}"
    rel = PurePosixPath(str(raw).strip())
    if not str(rel) or rel.is_absolute() or ".." in rel.parts:
        raise AppError(f"{field}: give a path relative to the data folder, got {raw!r}", fields={field: "not relative"})
    root = Path(settings.PADDOCK_DATA_DIR).resolve()
    full = (root / rel).resolve()
    if root not in full.parents:
        raise AppError(f"{field}: {raw!r} is outside the data folder", fields={field: "outside the data folder"})
    if not full.exists():
        raise AppError(f"{field}: {raw!r} does not exist in the data folder", fields={field: "not found"})
    return str(rel)


def _bars_fields(info, options: dict[str, str]) -> dict[str, Any]:
    """The dataset fields that describe its bars, from the loader's report."""
    bars = dict(info.bars or {})
    return {
        "interval": bars.get("interval", "1d"),
        "session": bars.get("session", "daily"),
        "bars": bars,
        "loader_options": options,
    }


#: Fields of a dataset request a user fills in; a loader error naming anything else (a column such
#: as ``close``, a limit such as ``file_rows``, or no field) is about the data of the files.
REQUEST_FIELDS = ("name", "file", "paths", "tickers", "timezone", "bar_label", "session", "membership")


def _on_request_field(exc: AppError, field: str) -> AppError:
    """``exc`` with every field that is not one of :data:`REQUEST_FIELDS` reported on ``field``
    (``file`` for an upload, ``paths`` for data-folder files); the loader's messages already say
    the column, row or limit they are about, in words."""
    inner = [k for k in exc.fields if k.split(".")[0] not in REQUEST_FIELDS]
    if not inner:
        return exc
    kept = {k: v for k, v in exc.fields.items() if k not in inner}
    said = [str(exc.fields[k]) for k in inner]
    merged = "; ".join([kept[field], *said] if field in kept else said)
    return AppError(exc.message, fields={**kept, field: merged}, status=exc.status, details=dict(exc.details))


def _blamed_field(exc: AppError, tickers: list[str] | None) -> str:
    """The request field a loader error of data-folder files is reported on: ``tickers`` when it
    names one of the requested tickers and no row of a file (a ticker no file holds: the choice
    of tickers is wrong, not the paths), else ``paths``."""
    ticker = exc.details.get("ticker")
    if tickers and ticker in tickers and "row" not in exc.details:
        return "tickers"
    return "paths"


MEMBERSHIP_SUFFIXES = (".csv", ".csv.gz")


def _store_membership(dataset: Dataset, membership: UploadedFile | None, info) -> None:
    """Store the uploaded membership file on the (unsaved) ``dataset`` and validate it against
    the dataset's tickers and dates (``engine.check_membership``); the survivorship line then
    names the point-in-time universe. The stored file is removed again when it is refused.

    Raises:
        AppError: naming the field ``membership`` (and the row and ticker): a file type other
            than CSV, an empty file, or a file the trainer's membership rules refuse.
    """
    if membership is None:
        return
    shown = Path(membership.name or "").name
    if not shown.lower().endswith(MEMBERSHIP_SUFFIXES):
        raise AppError(
            "membership: expected a .csv or .csv.gz file with the columns ticker,from,to",
            fields={"membership": f"unsupported type: {shown}"},
        )
    if not membership.size:
        raise AppError(f"membership: {shown} is empty (0 bytes)", fields={"membership": f"{shown} is empty (0 bytes)"})
    dataset.membership.save(shown, membership, save=False)
    dataset.membership_name = shown
    local = upload_local_path(dataset.membership.name, dataset.membership.storage)
    try:
        engine.check_membership(local, name=shown, tickers=info.tickers, start=info.start, end=info.end)
    except AppError:
        dataset.membership.delete(save=False)
        raise
    dataset.survivorship = engine.survivorship_note([], info.start, info.end, membership=shown) or ""


#: The most files or folders one dataset may name (the data folder holds about a dozen).
MAX_DATASET_PATHS = 32


def dataset_create_from_files(
    *,
    owner,
    name: str,
    paths: list[str],
    tickers: list[str] | None = None,
    options: dict[str, Any] | None = None,
    membership: UploadedFile | None = None,
) -> Dataset:
    """Create a dataset from files in ``PADDOCK_DATA_DIR``, validated by the trainer's loader.

    Args:
        owner: the user.
        name: unique per user.
        paths: file (or folder) paths relative to the data folder.
        tickers: keep only these tickers (``None`` = all).
        options: intraday loader options (``timezone``, ``bar_label``, ``session``); unset or
            empty ones keep the defaults (detected zone and label, regular session).
        membership: an uploaded point-in-time membership file (``ticker,from,to``), optional.

    Raises:
        AppError: more than :data:`MAX_DATASET_PATHS` paths (``paths``), a path outside the data
            folder, missing or named twice (``paths.<i>``), data the loader
            rejects (naming file, row or ticker), or a membership file it refuses
            (``membership``, naming the row and ticker).
    """
    name = _check_name(owner, name)
    if not paths:
        raise AppError("paths: give at least one file", fields={"paths": "required"})
    if len(paths) > MAX_DATASET_PATHS:  # before any file is opened: each costs a full read
        why = f"at most {MAX_DATASET_PATHS} files or folders, got {len(paths):,}"
        raise AppError(f"paths: {why}", fields={"paths": why})
    rel = [_relative_data_path(p, i) for i, p in enumerate(paths)]
    first: dict[str, int] = {}
    for i, p in enumerate(rel):
        if p in first:  # the same file twice would be read (and its rows merged) twice
            field = f"paths.{i}"
            why = f"{p!r} is paths.{first[p]} again"
            raise AppError(f"{field}: {why}", fields={field: why})
        first[p] = i
    if tickers is not None:
        tickers = engine.clean_tickers(tickers)
    options = engine.loader_options(options)
    root = Path(settings.PADDOCK_DATA_DIR)
    try:
        info = engine.inspect_market_files([root / p for p in rel], tickers=tickers, options=options)
    except AppError as exc:  # name files as the user gave them, not by their server path
        named = exc.with_names({str(root / p): p for p in rel} | {f"{root}/": ""})
        raise _on_request_field(named, _blamed_field(named, tickers)) from exc
    dataset = Dataset(
        owner=owner,
        name=name,
        paths=rel,
        tickers=info.tickers,
        start_date=info.start,
        end_date=info.end,
        notes=info.notes,
        survivorship=info.survivorship,
        **_bars_fields(info, options),
    )
    _store_membership(dataset, membership, info)
    with transaction.atomic():
        dataset.save()
    dataset_preview_build(dataset)
    return dataset


def dataset_create_from_upload(
    *,
    owner,
    name: str,
    upload: UploadedFile,
    options: dict[str, Any] | None = None,
    membership: UploadedFile | None = None,
) -> Dataset:
    """Create a dataset from one uploaded CSV/CSV.gz/Parquet file (stored under var/uploads, or
    the bucket's uploads/).

    ``options`` are the intraday loader options and ``membership`` an optional membership
    file, as for :func:`dataset_create_from_files`.

    Raises:
        AppError: a file type the loader does not read, an empty file (0 bytes), or data the
            loader rejects; the stored file is removed again.
    """
    name = _check_name(owner, name)
    filename = (upload.name or "").lower()
    if not filename.endswith(ALLOWED_SUFFIXES):
        raise AppError(
            "file: expected a .csv, .csv.gz or .parquet file", fields={"file": f"unsupported type: {upload.name}"}
        )
    if not upload.size:
        shown = Path(upload.name).name
        raise AppError(f"file: {shown} is empty (0 bytes)", fields={"file": f"{shown} is empty (0 bytes)"})
    options = engine.loader_options(options)
    shown = Path(upload.name).name  # the user knows the file by its own name, not the stored one
    dataset = Dataset(owner=owner, name=name, start_date="1970-01-01", end_date="1970-01-01", upload_name=shown)
    dataset.upload.save(Path(upload.name).name, upload, save=False)
    stored = dataset.source_paths()
    try:
        info = engine.inspect_market_files(stored, options=options)
    except AppError as exc:
        dataset.upload.delete(save=False)
        raise _on_request_field(exc.with_names({stored[0]: shown, Path(stored[0]).name: shown}), "file") from exc
    dataset.tickers = info.tickers
    dataset.start_date = info.start
    dataset.end_date = info.end
    stored_name = Path(stored[0]).name
    dataset.notes = [note.replace(stored_name, shown) for note in info.notes]
    dataset.survivorship = engine.survivorship_note([shown], info.start, info.end) or info.survivorship
    for key, value in _bars_fields(info, options).items():
        setattr(dataset, key, value)
    dataset.bars["timezone"] = str(dataset.bars.get("timezone", "")).replace(stored_name, shown)
    try:
        _store_membership(dataset, membership, info)
    except AppError:
        dataset.upload.delete(save=False)
        raise
    with transaction.atomic():
        dataset.save()
    dataset_preview_build(dataset)
    return dataset


def _read_prices(path: str) -> pd.DataFrame | None:
    """``date, tic, close`` rows of one already-validated file (adjusted close when present)."""
    lower = path.lower()
    stamps = ("date", "datetime", "timestamp", "datetime_utc", "datetime_et")
    wanted = {*stamps, "tic", "ticker", "symbol", "adj_close", "adjusted_close", "close"}
    if lower.endswith((".parquet", ".pq")):
        frame = pd.read_parquet(path)
    else:  # only the columns the chart needs: under half the parsing time of the Dow-30 file
        frame = pd.read_csv(path, usecols=lambda c: str(c).strip().lower() in wanted)
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    tic = next((c for c in ("tic", "ticker", "symbol") if c in frame.columns), None)
    close = next((c for c in ("adj_close", "adjusted_close", "close") if c in frame.columns), None)
    stamp = next((c for c in stamps if c in frame.columns), None)
    if stamp is None or close is None:
        return None
    frame = frame.rename(columns={stamp: "date"})
    out = pd.DataFrame(
        {
            "date": pd.to_datetime(frame["date"].astype(str).str.slice(0, 10), format="%Y-%m-%d", errors="coerce"),
            "tic": frame[tic].astype(str) if tic else Path(path).name.split(".")[0].upper(),
            "close": pd.to_numeric(frame[close], errors="coerce"),
        }
    )
    return out.dropna()


def _preview_path(dataset: Dataset) -> Path:
    stamp = int(dataset.created_at.timestamp()) if dataset.created_at else 0
    return Path(settings.PADDOCK_CACHE_DIR) / "previews" / f"dataset-{dataset.pk}-{stamp}.json"


def dataset_preview_build(dataset: Dataset) -> dict[str, Any]:
    """Compute and store the dataset's price preview: weekly (Friday) closes of every ticker.

    Written once, atomically (temporary file + rename), next to the processed-data cache;
    the dataset page reads it instead of parsing the price files (9 s for the Dow-30 file on
    a busy machine, 20 ms from the stored JSON).

    Returns:
        ``{"series": [{"ticker", "dates": [YYYY-MM-DD], "close": [USD]}], "tickers_total": n}``.
    """
    frames = [f for f in (_read_prices(p) for p in dataset.source_paths()) if f is not None]
    series = []
    if frames:
        prices = pd.concat(frames)
        present = set(prices["tic"])
        for ticker in [t for t in dataset.tickers if t in present]:
            weekly = prices[prices["tic"] == ticker].set_index("date")["close"].sort_index().resample("W-FRI").last()
            weekly = weekly.dropna()
            series.append(
                {
                    "ticker": ticker,
                    "dates": [d.strftime("%Y-%m-%d") for d in weekly.index],
                    "close": [round(float(v), 4) for v in weekly.to_numpy()],
                }
            )
    result = {"series": series, "tickers_total": len(dataset.tickers)}
    path = _preview_path(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, separators=(",", ":")))
    os.replace(tmp, path)
    return result


def dataset_preview(dataset: Dataset) -> dict[str, Any]:
    """The stored price preview (built now if it is missing: a dataset from before it existed)."""
    try:
        return json.loads(_preview_path(dataset).read_text())
    except (OSError, ValueError):
        return dataset_preview_build(dataset)


def dataset_files(*, data_dir: Path | None = None) -> list[str]:
    """Data files offered for new datasets: paths relative to ``PADDOCK_DATA_DIR``."""
    root = Path(data_dir or settings.PADDOCK_DATA_DIR)
    if not root.is_dir():
        return []
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(ALLOWED_SUFFIXES)
    )
