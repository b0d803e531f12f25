"""``runs_budget_quotas``: budgets of one's own (``purpose``, ``ended_at``) and each user's quota
for them (``BudgetQuota``); the demo's existing budgets are marked ``demo``."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

#: The demo's budget names (``webapp.runs.demo.profiles``), as they were when this ran.
DEMO_BUDGETS = ("Demo budget", "Intraday demo budget")


def mark_demo_budgets(apps, schema_editor):
    """Budgets the demo made before budgets had a purpose are the demo's."""
    apps.get_model("runs", "ClusterBudget").objects.filter(name__in=DEMO_BUDGETS).update(purpose="demo")


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0012_trial_ledger"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="clusterbudget",
            name="ended_at",
            field=models.DateTimeField(blank=True, help_text="ended by its owner: no generation starts", null=True),
        ),
        migrations.AddField(
            model_name="clusterbudget",
            name="purpose",
            field=models.CharField(
                choices=[
                    ("assigned", "Assigned by staff"),
                    ("own", "Your own (within your quota)"),
                    ("demo", "The demo's"),
                ],
                default="assigned",
                help_text="own budgets count against their owner's quota (``BudgetQuota``); assigned and demo ones do not",
                max_length=10,
            ),
        ),
        migrations.CreateModel(
            name="BudgetQuota",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "device_hours",
                    models.FloatField(blank=True, help_text="device hours held at once; empty = default", null=True),
                ),
                (
                    "max_concurrent_pods",
                    models.PositiveIntegerField(blank=True, help_text="pods at once; empty = default", null=True),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="budget_quota",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.RunPython(mark_demo_budgets, migrations.RunPython.noop),
    ]
