"""Market datasets: which files a task trains on, and what they were found to hold."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.db import models


def uploads_storage() -> FileSystemStorage:
    """Storage of user-uploaded data files (``PADDOCK_UPLOADS_DIR``, i.e. ``var/uploads``)."""
    return FileSystemStorage(location=str(settings.PADDOCK_UPLOADS_DIR))


class Dataset(models.Model):
    """A set of daily OHLCV files, validated once when it was created.

    The source is either ``paths`` (files relative to ``PADDOCK_DATA_DIR``, shared read-only by
    every worker) or one ``upload`` stored under ``var/uploads``. ``tickers``, ``start_date``,
    ``end_date`` and ``notes`` are what the trainer's loader found when the dataset was
    created (adjustment choices, merged duplicates), shown to the user before a task is built.
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
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="market_dataset_owner_name_unique")]

    def __str__(self) -> str:
        return self.name

    def source_paths(self) -> list[str]:
        """Absolute paths of the files to load, for ``trainer.data.DataSpec.paths``."""
        if self.upload:
            return [self.upload.path]
        return [str(Path(settings.PADDOCK_DATA_DIR) / p) for p in self.paths]

    def file_names(self) -> dict[str, str]:
        """Absolute path of each source file -> the name the user knows it by (for messages)."""
        if self.upload:
            return {self.upload.path: self.upload_name or Path(self.upload.name).name}
        return {str(Path(settings.PADDOCK_DATA_DIR) / p): p for p in self.paths}
