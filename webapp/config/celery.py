"""The Celery application: queues ``gpu`` (generations) and ``cpu`` (backtests, housekeeping)."""

from __future__ import annotations

import os
import sys

from celery import Celery
from celery.signals import celeryd_after_setup, worker_process_init
from kombu import Exchange, Queue

import webapp.core.workers  # registers the worker-info remote-control command, the Beacon bootstep

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")


def _settings_or_exit() -> None:
    # Evaluate settings now so a bad environment variable stops the worker (or beat) with the
    # one-line message instead of a traceback at the first task.
    from django.conf import settings

    from webapp.config.env import SettingsError

    try:
        settings.INSTALLED_APPS  # noqa: B018 - touching a setting loads them all
    except SettingsError as exc:
        sys.stderr.write(f"configuration error: {exc}\n")
        sys.exit(2)


_settings_or_exit()

app = Celery("paddock")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each queue has its own direct exchange and routing key. A bare Queue("gpu") inherits the
# default exchange and key ("cpu"), which bound both queues to "cpu" messages.
app.conf.task_queues = (
    Queue("gpu", Exchange("gpu", type="direct"), routing_key="gpu"),
    Queue("cpu", Exchange("cpu", type="direct"), routing_key="cpu"),
)
app.conf.task_default_exchange = "cpu"
app.conf.task_default_routing_key = "cpu"
# Recovery from a broker outage (webapp.core.workers): reconnect every second, write worker
# heartbeats for /healthz, sweep for lost messages as soon as the broker is back.
app.conf.worker_consumer = "webapp.core.workers:Consumer"
app.steps["consumer"].add(webapp.core.workers.Beacon)
app.autodiscover_tasks()


@celeryd_after_setup.connect
def _check_worker_device(**_kwargs) -> None:
    # A CUDA worker runs a tiny kernel (in a child interpreter: this prefork parent must not
    # initialise CUDA) before it takes generations; when that fails it refuses the gpu queue
    # (webapp.core.workers.Beacon) and says why in its log and heartbeat (/healthz).
    import logging

    from webapp import engine
    from webapp.core import workers

    device = workers.worker_device()
    problem = engine.worker_device_problem(device)
    if problem is not None:
        workers.DEVICE_PROBLEM = f"{device} does not work in this worker: {problem}"
        logging.getLogger("webapp.core.workers").error(
            "%s; this worker will not take generations (the gpu queue)", workers.DEVICE_PROBLEM
        )


@worker_process_init.connect
def _limit_torch_threads(**_kwargs) -> None:
    # Each worker process gets the cores it is given (1 on a 2-core machine by default).
    from django.conf import settings

    from webapp import engine

    engine.configure_process(threads=settings.PADDOCK_TORCH_THREADS)
