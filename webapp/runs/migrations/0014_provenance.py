"""``runs_provenance``: what produced each run and agent (code version, torch and numpy versions,
data hash, seed); rows made before stay ``{}``."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0013_budget_quotas"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="provenance",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="what produced it, recorded by the worker: code_version, packages (python, torch, numpy), data_sha256, seed (the generation's)",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="provenance",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="what the run was created with: code_version (git commit or package version), packages (python, torch, numpy), data_sha256 (the dataset's files), seed",
            ),
        ),
    ]
