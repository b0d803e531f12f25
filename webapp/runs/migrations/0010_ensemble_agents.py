"""Ensembles become agents of their own kind, off the pods: ``Agent.kind`` and ``Agent.members``.

An ensemble was stored as an agent of its first member's pod on a synthetic finished generation
(the pod's next number, ``hyperparameters = {"ensemble_of": [ids]}``), so it advanced that pod's
generation counter and read as a fresh pod agent. Now an ensemble has ``kind = "ensemble"``, its
member ids in ``members`` (best first), no generation, pod, parent, depth or lineage, the
members' algorithm(s) and tickers, and the env steps of its members' lines (each agent counted
once). Existing ensembles are converted and their synthetic generations deleted (they trained
nothing: no env steps, no training points, no budget use).

The constraint that keeps the two kinds apart comes in 0011 (a schema change after this data change
would meet its pending trigger events on PostgreSQL). Going back is possible only before any ensemble
exists (a trained agent needs a generation).
"""

import django.db.models.deletion
from django.db import migrations, models


def _lines_env_steps(Agent, ids):
    """Env steps of the lines of agents ``ids`` (ancestors included), each agent counted once."""
    rows = {}
    todo = set(ids)
    while todo:
        found = Agent.objects.filter(pk__in=todo).values_list("id", "parent_id", "generation__env_steps")
        todo = set()
        for pk, parent, own in found:
            rows[pk] = own or 0
            if parent is not None and parent not in rows:
                todo.add(parent)
    return sum(rows.values())


def ensembles_off_the_pods(apps, schema_editor):
    Agent = apps.get_model("runs", "Agent")
    Generation = apps.get_model("runs", "Generation")
    for agent in Agent.objects.filter(hyperparameters__has_key="ensemble_of").order_by("pk"):
        ids = [int(i) for i in agent.hyperparameters["ensemble_of"]]
        members = {a.pk: a for a in Agent.objects.filter(pk__in=ids)}
        ordered = [members[i] for i in ids if i in members]
        algorithms = list(dict.fromkeys(a.algorithm for a in ordered if a.algorithm))
        synthetic = agent.generation_id
        agent.kind = "ensemble"
        agent.members = ids
        agent.hyperparameters = {}
        agent.generation = None
        agent.pod = None
        agent.parent = None
        agent.depth = None
        agent.lineage = None
        agent.on_leaderboard = False
        agent.algorithm = "+".join(algorithms)[:20]
        agent.tickers = list(ordered[0].tickers) if ordered else []
        agent.total_env_steps = _lines_env_steps(Agent, ids)
        agent.save()
        Generation.objects.filter(pk=synthetic, hyperparameters__has_key="ensemble_of").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0009_task_algorithm_hyperparameters"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="kind",
            field=models.CharField(
                choices=[("trained", "Trained"), ("ensemble", "Ensemble")], default="trained", max_length=10
            ),
        ),
        migrations.AddField(
            model_name="agent",
            name="members",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="an ensemble's member agent ids, best first (the leaderboard's order when it was built); "
                "[] for a trained agent",
            ),
        ),
        migrations.AlterField(
            model_name="agent",
            name="depth",
            field=models.PositiveIntegerField(
                blank=True,
                default=1,
                help_text="generation in the lineage: 1 for a fresh agent, the parent's + 1 otherwise; "
                "null for an ensemble",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="agent",
            name="generation",
            field=models.OneToOneField(
                blank=True,
                help_text="the generation that trained it; null for an ensemble",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="agent",
                to="runs.generation",
            ),
        ),
        migrations.AlterField(
            model_name="agent",
            name="pod",
            field=models.ForeignKey(
                blank=True,
                help_text="null for an ensemble",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="agents",
                to="runs.pod",
            ),
        ),
        migrations.AlterField(
            model_name="agent",
            name="total_env_steps",
            field=models.BigIntegerField(
                default=0,
                help_text="env steps of its whole line (ancestors + own); an ensemble's: of its members' lines, "
                "each agent counted once",
            ),
        ),
        migrations.RunPython(ensembles_off_the_pods, migrations.RunPython.noop),
    ]
