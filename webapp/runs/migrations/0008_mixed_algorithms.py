"""Mixed-algorithm runs: ``Task.algorithms``, ``Generation.algorithm`` and ``Agent.algorithm``.

Existing generations and agents were trained with their task's single algorithm.
"""

from django.db import migrations, models


def fill_algorithms(apps, schema_editor):
    Task = apps.get_model("runs", "Task")
    Generation = apps.get_model("runs", "Generation")
    Agent = apps.get_model("runs", "Agent")
    for task in Task.objects.all().only("id", "algorithm"):
        Task.objects.filter(pk=task.pk).update(algorithms=[task.algorithm])
        Generation.objects.filter(run__task_id=task.pk).exclude(attempt=0).update(algorithm=task.algorithm)
        Agent.objects.filter(run__task_id=task.pk).update(algorithm=task.algorithm)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_data_notes_agent_tickers_backtest_error"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="algorithms",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="the algorithms a run's fresh pods may train, ``algorithm`` first; [] = only ``algorithm``",
            ),
        ),
        migrations.AddField(
            model_name="generation",
            name="algorithm",
            field=models.CharField(blank=True, help_text="set when claimed; its parent's, if any", max_length=20),
        ),
        migrations.AddField(
            model_name="agent",
            name="algorithm",
            field=models.CharField(blank=True, help_text="the algorithm it was trained with", max_length=20),
        ),
        migrations.RunPython(fill_algorithms, migrations.RunPython.noop),
    ]
