"""Celery beat's scheduler for Paddock: a tick that could not be sent is tried again.

Celery's scheduler logs a failed send ("Message Error") and waits for the entry's next run: a
reaper tick that fell into a Redis outage was lost, and lost generation messages waited up to
30 s more after Redis was back. Here a failed send is tried again every
:data:`RETRY_EVERY_S` until it goes out, for at most one period of the entry (the next regular
tick takes over after that). Beat has nothing else to do while the broker is down.
"""

from __future__ import annotations

import logging
import time

from celery.beat import PersistentScheduler

logger = logging.getLogger(__name__)

RETRY_EVERY_S = 1.0


def _period_s(entry) -> float:
    run_every = getattr(entry.schedule, "run_every", None)
    return run_every.total_seconds() if run_every is not None else 60.0


class RetryingScheduler(PersistentScheduler):
    """``PersistentScheduler`` whose failed sends are retried (see the module docstring)."""

    def apply_entry(self, entry, producer=None):
        deadline = time.monotonic() + _period_s(entry)
        failures = 0
        while True:
            try:
                self.apply_async(entry, producer=producer, advance=False)
            except Exception as exc:
                failures += 1
                if failures == 1:
                    logger.warning(
                        "beat: could not send %s (%s); trying again every %g s", entry.name, exc, RETRY_EVERY_S
                    )
                if time.monotonic() + RETRY_EVERY_S >= deadline:
                    logger.warning("beat: %s not sent after %d tries; the next tick sends it", entry.name, failures)
                    return
                time.sleep(RETRY_EVERY_S)
                continue
            if failures:
                logger.warning("beat: %s sent after %d failed tries", entry.name, failures)
            return
