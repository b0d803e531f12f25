"""``runs_trial``: the trial ledger (``models.Trial``), every trained agent ever evaluated on a
task; filled here from the trained agents that already exist."""

import math

import django.db.models.deletion
from django.db import migrations, models


def _finite(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def backfill(apps, schema_editor):
    Agent = apps.get_model("runs", "Agent")
    Trial = apps.get_model("runs", "Trial")
    rows = []
    for agent in Agent.objects.filter(kind="trained").select_related("run").iterator():
        metrics = agent.metrics or {}
        rows.append(
            Trial(
                task_id=agent.run.task_id,
                run_id=agent.run_id,
                agent_id=agent.id,
                sharpe_ratio=_finite(metrics.get("sharpe_ratio")),
                information_ratio=_finite((metrics.get("vs_equal_weight") or {}).get("information_ratio")),
                num_periods=metrics.get("num_periods") or metrics.get("num_days"),
            )
        )
    Trial.objects.bulk_create(rows, batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0011_agent_kind_shape"),
    ]

    operations = [
        migrations.CreateModel(
            name="Trial",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("sharpe_ratio", models.FloatField(help_text="annualised validation Sharpe ratio", null=True)),
                ("information_ratio", models.FloatField(help_text="annualised IR over cost-free 1/N", null=True)),
                (
                    "num_periods",
                    models.PositiveIntegerField(help_text="validation returns behind the figures", null=True),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "agent",
                    models.OneToOneField(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="trial",
                        to="runs.agent",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="trials",
                        to="runs.run",
                    ),
                ),
                (
                    "task",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="trials", to="runs.task"
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
                "indexes": [models.Index(fields=["task", "id"], name="runs_trial_task")],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
