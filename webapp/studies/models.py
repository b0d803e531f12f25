"""Walk-forward studies: a task plus folds, each fold an ordinary run on its own spans.

A :class:`Study` is planned on its base task's data (``webapp.engine.plan_study_folds``): fold
``i`` trains on everything from the study's start up to its validation span, is selected on the
validation span and tested on the next calendar year(s). Each :class:`StudyFold` is a
:class:`~webapp.runs.models.Run` of a copy of the base task whose splits are the fold's spans,
so the folds fan out over every worker. All fold runs draw on the study's own
:class:`~webapp.runs.models.ClusterBudget` (its env-step cap is the whole study's; its other
limits are copied from the budget the user chose), so the budget applies to the whole study.
When every fold run has ended, the stitched out-of-sample record is computed and stored in
``result``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Study(models.Model):
    """One walk-forward study.

    Status flow: ``running`` (fold runs training) -> ``stitching`` (the record is being
    computed, claimed by one worker) -> ``done``; ``failed`` (a fold ended without agents, or
    the record could not be computed; ``error`` says why) and ``cancelled`` (by its user) are
    terminal too.
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        STITCHING = "stitching"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    TERMINAL = (Status.DONE, Status.FAILED, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="studies")
    name = models.CharField(max_length=200)
    task = models.ForeignKey("runs.Task", on_delete=models.PROTECT, related_name="studies", help_text="the base task")
    budget = models.ForeignKey(
        "runs.ClusterBudget", on_delete=models.PROTECT, related_name="studies", help_text="the study's own budget"
    )
    plan = models.JSONField(
        default=dict, help_text="start, end, first_test_year, fold_years, validation_days, gap_days, train_days"
    )
    num_pods = models.PositiveIntegerField(default=2, help_text="pods of each fold's run")
    generation_steps = models.PositiveIntegerField(help_text="env steps per generation")
    env_steps_per_fold = models.BigIntegerField(help_text="the study budget's env-step cap is folds x this")
    seed = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True, help_text="folds, out_of_sample, pbo (when done)")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class StudyFold(models.Model):
    """Fold ``index`` of a study: its spans and the run that trains and selects on them."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="folds")
    index = models.PositiveIntegerField()
    spans = models.JSONField(help_text="{train, validation, test: {start, end}}")
    run = models.OneToOneField("runs.Run", on_delete=models.PROTECT, related_name="study_fold")

    class Meta:
        ordering = ["study", "index"]
        constraints = [models.UniqueConstraint(fields=["study", "index"], name="study_fold_unique_index")]
