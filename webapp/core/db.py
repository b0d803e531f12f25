"""Database connections that heal: retry one operation on a fresh connection after the old one
dropped (PostgreSQL restarted, the backend was terminated, a network blip).

Django keeps one connection per thread and, outside a request, never replaces a broken one by
itself: every later query on it raises ``InterfaceError: connection already closed``. A long
task (a generation trains for minutes) must therefore close it and go on with a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: What a dropped connection raises (``OperationalError``: terminated, server gone, timeout;
#: ``InterfaceError``: the connection object is already closed).
CONNECTION_ERRORS = (OperationalError, InterfaceError)


def discard_connection() -> None:
    """Close this thread's database connection, broken or not; the next query opens a new one."""
    try:
        connection.close()
    except Exception:  # closing a dead socket may fail too; the object is reset either way
        connection.connection = None


def on_fresh_connection(fn: Callable[..., T], /, *args, **kwargs) -> T:
    """Call ``fn(*args, **kwargs)``; when it fails with a connection error outside a
    transaction, close the connection and call it once more on a new one.

    ``fn`` must be safe to run again after a failure (each of its transactions either
    committed nothing or is idempotent). Inside ``transaction.atomic`` nothing is retried: the
    transaction is lost with its connection and the caller must start over.

    Raises:
        Whatever the second call raises (a database that stays down is not hidden).
    """
    try:
        return fn(*args, **kwargs)
    except CONNECTION_ERRORS as exc:
        if connection.in_atomic_block:
            raise
        logger.warning("database connection lost (%s); retrying %s on a new connection", _one_line(exc), fn.__name__)
        discard_connection()
        return fn(*args, **kwargs)


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
