from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "webapp.reports"
    label = "reports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The runs app announces a finished run; it never imports this app.
        from webapp.reports import receivers
        from webapp.runs.signals import agent_test_metrics, run_ended

        run_ended.connect(receivers.queue_end_of_run_backtests, dispatch_uid="reports.end_of_run_backtests")
        agent_test_metrics.connect(receivers.test_metrics_for_model_card, dispatch_uid="reports.model_card_test")
