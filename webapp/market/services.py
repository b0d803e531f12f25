"""Writes of the market app: datasets from files in the data folder or from an upload."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from webapp import engine
from webapp.core.errors import AppError
from webapp.market.models import Dataset

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


def dataset_create_from_files(*, owner, name: str, paths: list[str], tickers: list[str] | None = None) -> Dataset:
    """Create a dataset from files in ``PADDOCK_DATA_DIR``, validated by the trainer's loader.

    Args:
        owner: the user.
        name: unique per user.
        paths: file (or folder) paths relative to the data folder.
        tickers: keep only these tickers (``None`` = all).

    Raises:
        AppError: a path outside the data folder or missing (``paths.<i>``), or data the loader
            rejects (naming file, row or ticker).
    """
    name = _check_name(owner, name)
    if not paths:
        raise AppError("paths: give at least one file", fields={"paths": "required"})
    rel = [_relative_data_path(p, i) for i, p in enumerate(paths)]
    root = Path(settings.PADDOCK_DATA_DIR)
    try:
        info = engine.inspect_market_files([root / p for p in rel], tickers=tickers)
    except AppError as exc:  # name files as the user gave them, not by their server path
        raise exc.with_names({str(root / p): p for p in rel} | {f"{root}/": ""}) from exc
    with transaction.atomic():
        return Dataset.objects.create(
            owner=owner,
            name=name,
            paths=rel,
            tickers=info.tickers,
            start_date=info.start,
            end_date=info.end,
            notes=info.notes,
        )


def dataset_create_from_upload(*, owner, name: str, upload: UploadedFile) -> Dataset:
    """Create a dataset from one uploaded CSV/CSV.gz/Parquet file (stored under var/uploads).

    Raises:
        AppError: a file type the loader does not read, or data it rejects; the stored file
            is removed again.
    """
    name = _check_name(owner, name)
    filename = (upload.name or "").lower()
    if not filename.endswith(ALLOWED_SUFFIXES):
        raise AppError(
            "file: expected a .csv, .csv.gz or .parquet file", fields={"file": f"unsupported type: {upload.name}"}
        )
    dataset = Dataset(owner=owner, name=name, start_date="1970-01-01", end_date="1970-01-01")
    dataset.upload.save(Path(upload.name).name, upload, save=False)
    stored = dataset.source_paths()
    try:
        info = engine.inspect_market_files(stored)
    except AppError as exc:
        dataset.upload.delete(save=False)
        # The user knows the file by its own name; the stored one is a server path.
        shown = Path(upload.name).name
        raise exc.with_names({stored[0]: shown, Path(stored[0]).name: shown}) from exc
    dataset.tickers = info.tickers
    dataset.start_date = info.start
    dataset.end_date = info.end
    dataset.notes = info.notes
    with transaction.atomic():
        dataset.save()
    return dataset


def dataset_files(*, data_dir: Path | None = None) -> list[str]:
    """Data files offered for new datasets: paths relative to ``PADDOCK_DATA_DIR``."""
    root = Path(data_dir or settings.PADDOCK_DATA_DIR)
    if not root.is_dir():
        return []
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(ALLOWED_SUFFIXES)
    )
