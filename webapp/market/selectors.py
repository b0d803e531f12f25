"""Reads of the market app that go beyond a row: a dataset's survivorship line."""

from __future__ import annotations

from webapp import engine
from webapp.market.models import Dataset


def dataset_survivorship(dataset: Dataset) -> str:
    """The one survivorship line a dataset's page and every report of it show ("" when none):
    the stored ``Dataset.survivorship``, else, for a dataset stored before the field, the rule of
    ``trainer.data.survivorship`` on its file names and dates (known membership snapshots)."""
    if dataset.survivorship:
        return dataset.survivorship
    names = list(dataset.paths or []) or [dataset.upload_name or ""]
    return engine.survivorship_note(names, dataset.start_date, dataset.end_date) or ""
