"""Per-algorithm hyperparameters of mixed-algorithm tasks: ``Task.algorithm_hyperparameters``.

Existing tasks keep ``{}``: their other algorithms go on taking the shared values of
``hyperparameters`` and their defaults for the rest, as before.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_mixed_algorithms"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="algorithm_hyperparameters",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="{algorithm: full hyperparameters} of each allowed algorithm but ``algorithm`` (whose are "
                "``hyperparameters``); an algorithm missing here takes the shared values of ``hyperparameters``",
            ),
        ),
    ]
