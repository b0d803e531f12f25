from django.apps import AppConfig


class MarketConfig(AppConfig):
    name = "webapp.market"
    label = "market"
    default_auto_field = "django.db.models.BigAutoField"
