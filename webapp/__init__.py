"""Paddock web application (Django + Channels + Celery)."""
