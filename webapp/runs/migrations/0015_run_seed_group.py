"""``runs_run_seed_group``: runs of one configuration made with several seeds share a group."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0014_provenance"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="seed_group",
            field=models.CharField(
                blank=True,
                db_index=True,
                default="",
                help_text="runs of one configuration made with several seeds share it (empty: a run on its own)",
                max_length=32,
            ),
        ),
    ]
