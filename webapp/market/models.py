"""Market datasets: which files a task trains on, and what they were found to hold."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.db import models


def uploads_storage() -> Storage:
    """Storage of user-uploaded data files, ``STORAGES["uploads"]``: ``var/uploads``, or the
    bucket's ``uploads/`` with ``PADDOCK_STORAGE=s3``."""
    return storages["uploads"]


def upload_local_path(name: str, storage: Storage) -> Path:
    """A local file holding the uploaded file ``name`` of ``storage`` (the trainer reads files
    by path).

    In a local folder, the file itself. In a bucket, a copy in ``PADDOCK_CACHE_DIR/uploads``
    under the object's ETag, fetched on first use on this machine (a cache fill: streamed to a
    ``.part`` file and renamed when complete, so a half-fetched file is never read; a name
    deleted and uploaded again has a new ETag, so an old copy is never read for it).
    """
    from webapp.core import artifacts

    if not artifacts.is_remote(storage):
        return Path(storage.path(name))
    local = Path(settings.PADDOCK_CACHE_DIR) / "uploads" / artifacts.etag(name, storage) / name
    if not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        artifacts.local_copy(name, local, storage=storage)
    return local


class Dataset(models.Model):
    """A set of daily or intraday OHLCV files, validated once when it was created.

    The source is either ``paths`` (files relative to ``PADDOCK_DATA_DIR``, shared read-only by
    every worker) or one ``upload`` stored under ``var/uploads`` (or the bucket's ``uploads/``).
    ``tickers``, ``start_date``,
    ``end_date`` and ``notes`` are what the trainer's loader found when the dataset was
    created (adjustment choices, merged duplicates), shown to the user before a task is built.
    ``interval`` (``1d``, ``1h``, ``30m``, ``15m``, ``5m``, ``1m``), ``session`` and ``bars``
    (``trainer.data.intraday.BarInfo`` as a dict: bar label and time zone detected and used,
    half days, missing-bar report) describe the bars; ``loader_options`` are the intraday
    options the user chose (non-default ones only), passed to every task's data spec.
    ``survivorship`` is one line when the universe was chosen after its data starts (a known
    membership snapshot such as the shared Dow 30 file of 2022 members, or no ticker ever leaving
    it; ``trainer.data.survivorship``), shown on the dataset page and every report.
    ``membership`` is an optional point-in-time membership file (``ticker,from,to``,
    ``trainer.data.membership``), uploaded with the dataset and validated against it; every task
    of the dataset then trades only each day's members (``data.membership`` of its spec), and
    ``survivorship`` says so instead of warning.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    paths = models.JSONField(default=list, blank=True, help_text="file paths relative to PADDOCK_DATA_DIR")
    upload = models.FileField(storage=uploads_storage, upload_to="datasets/%Y/%m/", blank=True)
    upload_name = models.CharField(max_length=255, blank=True, help_text="the uploaded file's name on the user's side")
    tickers = models.JSONField(default=list)
    start_date = models.DateField()
    end_date = models.DateField()
    notes = models.JSONField(default=list, blank=True, help_text="validation notes, one line each")
    interval = models.CharField(max_length=8, default="1d", help_text="bar interval: 1d, 1h, 30m, 15m, 5m or 1m")
    session = models.CharField(max_length=16, default="daily", help_text="daily, regular or extended")
    bars = models.JSONField(default=dict, blank=True, help_text="what the loader found about the bars")
    loader_options = models.JSONField(
        default=dict, blank=True, help_text="intraday loader options chosen: timezone, bar_label, session"
    )
    membership = models.FileField(
        storage=uploads_storage,
        upload_to="memberships/%Y/%m/",
        blank=True,
        help_text="point-in-time index membership (ticker,from,to CSV; trainer.data.membership), optional",
    )
    membership_name = models.CharField(
        max_length=255, blank=True, help_text="the membership file's name on the user's side"
    )
    survivorship = models.TextField(
        blank=True,
        help_text="one line when the universe was chosen after the data starts (trainer.data.survivorship)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="market_dataset_owner_name_unique")]

    def __str__(self) -> str:
        return self.name

    def source_paths(self) -> list[str]:
        """Absolute paths of the files to load, for ``trainer.data.DataSpec.paths``."""
        if self.upload:
            return [str(upload_local_path(self.upload.name, self.upload.storage))]
        return [str(Path(settings.PADDOCK_DATA_DIR) / p) for p in self.paths]

    @property
    def intraday(self) -> bool:
        return self.interval != "1d"

    def data_options(self) -> dict[str, str]:
        """The loader options a task's ``data`` spec needs to read these files as they were read
        here, and the membership file's local path when the dataset has one
        (``trainer.data.DataSpec`` fields)."""
        options = dict(self.loader_options or {})
        if self.membership:
            options["membership"] = str(upload_local_path(self.membership.name, self.membership.storage))
        return options

    def file_names(self) -> dict[str, str]:
        """Absolute path of each source file -> the name the user knows it by (for messages)."""
        if self.upload:
            local = upload_local_path(self.upload.name, self.upload.storage)
            names = {str(local): self.upload_name or Path(self.upload.name).name}
        else:
            names = {str(Path(settings.PADDOCK_DATA_DIR) / p): p for p in self.paths}
        if self.membership:
            local = upload_local_path(self.membership.name, self.membership.storage)
            names[str(local)] = self.membership_name or Path(self.membership.name).name
        return names
