from django.apps import AppConfig


class StudiesConfig(AppConfig):
    name = "webapp.studies"
    label = "studies"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The runs app announces an ended run; it never imports this app.
        from webapp.runs.signals import run_ended
        from webapp.studies import receivers

        run_ended.connect(receivers.check_study_of_run, dispatch_uid="studies.fold_ended")
