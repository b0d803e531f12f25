from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "webapp.serving"
    label = "serving"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from webapp.serving import signals

        signals.connect()
