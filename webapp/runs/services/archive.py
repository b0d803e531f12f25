"""The owner's bookkeeping of runs: tags and a note, archiving, and deleting an ended run with
its artifacts (checkpoints, bundles, backtest series). Writes, each in one transaction."""

from __future__ import annotations

import logging
from typing import Any

from django.core.files.storage import default_storage
from django.db import transaction

from webapp.core.errors import AppError
from webapp.runs import bounds
from webapp.runs.models import Run

logger = logging.getLogger(__name__)

MAX_TAGS = 20
MAX_TAG_LENGTH = 40
MAX_NOTE_LENGTH = 4000


def _tags(raw: Any, fields: dict[str, str]) -> list[str] | None:
    """Tags as a list of distinct lower-case words (a comma-separated string is split)."""
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list | tuple) or not all(isinstance(t, str) for t in raw):
        fields["tags"] = "must be a list of words"
        return None
    tags = list(dict.fromkeys(t.strip().lower() for t in raw if t.strip()))
    if len(tags) > MAX_TAGS:
        fields["tags"] = f"at most {MAX_TAGS} tags, got {len(tags)}"
    long = [t for t in tags if len(t) > MAX_TAG_LENGTH]
    if long:
        fields["tags"] = f"a tag has at most {MAX_TAG_LENGTH} characters: {long[0][:50]!r}"
    return tags


@transaction.atomic
def run_annotate(*, run: Run, tags: Any = None, note: Any = None) -> Run:
    """Set a run's tags and/or note (``None`` leaves one unchanged).

    Raises:
        AppError: every bad field at once (400).
    """
    fields: dict[str, str] = {}
    new_tags = _tags(tags, fields) if tags is not None else None
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_LENGTH):
        fields["note"] = f"must be text of at most {MAX_NOTE_LENGTH} characters"
    bounds.raise_all(fields)
    changed = []
    if new_tags is not None:
        run.tags = new_tags
        changed.append("tags")
    if note is not None:
        run.note = note.strip()
        changed.append("note")
    if changed:
        Run.objects.filter(pk=run.pk).update(**{name: getattr(run, name) for name in changed})
    return run


@transaction.atomic
def run_archive(*, run: Run, archived: bool = True) -> Run:
    """Hide (or show again) a run in the runs list; its pages and API stay as they are."""
    Run.objects.filter(pk=run.pk).update(archived=bool(archived))
    run.archived = bool(archived)
    return run


def run_artifacts(run: Run) -> list[str]:
    """Storage names of a run's files: agent checkpoints, exported bundles and their sidecars,
    backtest daily series."""
    names = [a for a in run.agents.exclude(checkpoint="").values_list("checkpoint", flat=True)]
    names += [n for n in run.backtests.exclude(daily_csv="").values_list("daily_csv", flat=True)]
    folder = f"bundles/run-{run.pk}"
    try:
        _, files = default_storage.listdir(folder)
    except (FileNotFoundError, NotImplementedError, OSError):
        files = []
    names += [f"{folder}/{f}" for f in files]
    return names


def run_delete(*, run: Run) -> int:
    """Delete an ended run, its pods, generations, agents, curves and backtests, then their
    files (after the rows are gone, so no page can link a missing file).

    Returns:
        The number of files deleted.

    Raises:
        AppError: the run has not ended (409: stop it first).
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in Run.TERMINAL:
            raise AppError(f"run is {run.status}; stop it before deleting it", status=409)
        names = run_artifacts(run)
        run.delete()
    deleted = 0
    for name in names:
        try:
            if default_storage.exists(name):
                default_storage.delete(name)
                deleted += 1
        except OSError:
            logger.warning("could not delete %s", name, exc_info=True, extra={"run": run.pk})
    return deleted
