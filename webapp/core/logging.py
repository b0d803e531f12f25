"""Logging helpers: every record carries ``run`` and ``pod`` fields (``-`` when unknown)."""

from __future__ import annotations

import logging


class ContextFilter(logging.Filter):
    """Fill ``record.run``/``record.pod`` so the key=value format never fails.

    Log with ``logger.info("generation done", extra={"run": run_id, "pod": pod_id})``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        for key in ("run", "pod"):
            if not hasattr(record, key):
                setattr(record, key, "-")
        return True
