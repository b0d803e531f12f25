"""``runs_agent.score_se``: the standard error every validation score carries (issue 25, section 4)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0015_run_seed_group"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="score_se",
            field=models.FloatField(
                blank=True,
                help_text="SE of the score, from its sub-windows; null if unknown",
                null=True,
            ),
        ),
    ]
