"""Django project configuration; importing it binds the Celery app (``shared_task`` uses it)."""

from webapp.config.celery import app as celery_app

__all__ = ["celery_app"]
