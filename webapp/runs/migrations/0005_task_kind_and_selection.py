from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0004_generation_failure")]

    operations = [
        migrations.AddField(
            model_name="task",
            name="kind",
            field=models.CharField(
                choices=[("stock_trading", "Stock trading"), ("portfolio", "Portfolio allocation")],
                default="stock_trading",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="task",
            name="selection",
            field=models.JSONField(blank=True, default=dict, help_text="validation scoring rule; {} = the default"),
        ),
    ]
