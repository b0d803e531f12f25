"""``manage.py export_metrics RUN_ID``: a run's curves, scores and hyperparameters as
TensorBoard event files (``--tensorboard DIR``) and/or to an MLflow tracking store
(``--mlflow URI``, e.g. ``file:./mlruns``); see :mod:`webapp.runs.export`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from webapp.runs import export
from webapp.runs.models import Run


class Command(BaseCommand):
    help = "Export a run's training curves, scores and hyperparameters to TensorBoard and/or MLflow."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", type=int, help="the run's id (the number on its page)")
        parser.add_argument("--tensorboard", metavar="DIR", help="write event files under DIR/run-<id>/")
        parser.add_argument("--mlflow", metavar="URI", help="log to this MLflow tracking URI (file:/path/mlruns)")
        parser.add_argument("--experiment", default="paddock", help="MLflow experiment name (default: paddock)")

    def handle(self, *args, run_id: int, tensorboard: str | None, mlflow: str | None, experiment: str, **options):
        if not tensorboard and not mlflow:
            raise CommandError("give --tensorboard DIR and/or --mlflow URI", returncode=2)
        run = Run.objects.select_related("task").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"run_id: no run {run_id}", returncode=2)
        if tensorboard:
            folder = export.export_tensorboard(run, tensorboard)
            self.stdout.write(f"TensorBoard: {folder} (tensorboard --logdir {folder})")
        if mlflow:
            mlflow_id = export.export_mlflow(run, mlflow, experiment=experiment)
            self.stdout.write(f"MLflow: run {mlflow_id} in experiment {experiment!r} at {mlflow}")
