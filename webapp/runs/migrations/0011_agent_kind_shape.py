"""``runs_agent_kind_shape``: a trained agent has a generation, a pod and a depth; an ensemble has
none of them, no parent and never ranks on the leaderboard (see 0010)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_ensemble_agents"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("depth__isnull", False),
                    ("generation__isnull", False),
                    ("kind", "trained"),
                    ("pod__isnull", False),
                )
                | models.Q(
                    ("depth__isnull", True),
                    ("generation__isnull", True),
                    ("kind", "ensemble"),
                    ("on_leaderboard", False),
                    ("parent__isnull", True),
                    ("pod__isnull", True),
                ),
                name="runs_agent_kind_shape",
            ),
        ),
    ]
