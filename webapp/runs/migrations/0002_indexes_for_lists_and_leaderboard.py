# Indexes of the runs list (owner, status, newest first), per-run generation counts and the leaderboard.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="agent",
            index=models.Index(
                models.F("run"),
                models.OrderBy(models.F("score"), descending=True),
                models.F("created_seq"),
                condition=models.Q(("on_leaderboard", True)),
                name="runs_agent_leaderboard",
            ),
        ),
        migrations.AddIndex(
            model_name="generation",
            index=models.Index(fields=["run", "status"], name="runs_generation_run_status"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["owner", "-created_at", "-id"], name="runs_run_owner_created"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["owner", "status", "-created_at", "-id"], name="runs_run_owner_status_created"),
        ),
    ]
