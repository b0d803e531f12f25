"""The Celery application: queues ``gpu`` (generations) and ``cpu`` (backtests, housekeeping)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_process_init
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")

app = Celery("paddock")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("gpu"), Queue("cpu"))
app.autodiscover_tasks()


@worker_process_init.connect
def _limit_torch_threads(**_kwargs) -> None:
    # Each worker process gets the cores it is given (1 on a 2-core machine by default).
    from django.conf import settings

    from webapp import engine

    engine.configure_process(threads=settings.PADDOCK_TORCH_THREADS)
